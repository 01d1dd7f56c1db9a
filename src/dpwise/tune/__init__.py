"""Owns: `dpwise tune`: what is searched (space: the settings, the knobs, the candidates), the
journal (what was measured, a failure), the search in the workers (search; worker: the entry
and one training), what the figures decide (results: verdicts, results.json, the train flags
and code), the report (render) and the command's run (session).
May import: compare, report, advise, train, strategies, launch, workload, measure, diagnosis,
infra, errors
Imported by: commands
"""

"""Owns: `dpwise tune`: the knobs of a strategy (space), the search in the workers (search,
measure), its journal, the decision (decide), the answer (answer), results.json and the report.
May import: compare, report, advise, train, results, strategies, launch, workload, measure,
diagnosis, infra, errors
Imported by: commands
"""

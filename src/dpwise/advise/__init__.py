"""Owns: `dpwise advise`'s answer: the facts, the decision rules, the per-device memory estimate,
the answer from measured results (--from), and its text; the job scripts users submit (jobscript).
May import: train, results, projection, strategies, diagnosis, launch, workload, measure, infra,
errors
Imported by: commands, migrate, tune

`dpwise advise`: facts about the machine and the job, a per-device memory estimate, the rules.

- ``facts``: what dpwise knows (given, detected or assumed), one Fact each
- ``footprint``: what one training step holds beyond the model states (measured or traced)
- ``estimate``: the per-device memory estimate of each strategy, with its breakdown
- ``rules``: the decision rules, a Situation in and a Recommendation out
- ``from_results``: the answer from `dpwise compare`'s measurements (``--from``)
- ``request``: AdviseRequest, the scenario: each field one `dpwise advise` flag
- ``answer``: the orchestration: facts, estimate, rules or measurements
"""

"""Owns: `dpwise compare`: the run matrix, the run processes and their turns, measurement, the
checks (checks/), the verdict and claims, the analysis (the runs to results.json) and publishing;
--script: the user's own scripts' runs (scripted) and their analysis (scripted_analysis).
May import: report, userscript, link, projection, train, results, strategies, launch, workload,
measure, diagnosis, infra, errors
Imported by: commands, tune
"""

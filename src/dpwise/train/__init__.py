"""Owns: one training run: config, plan, the loop and its state, precision, finiteness, batch split,
checkpoints, outputs, restarts, the worker, preflight and the session.
May import: strategies, launch, workload, measure, diagnosis, infra, errors
Imported by: advise, commands, compare, link, tune
"""

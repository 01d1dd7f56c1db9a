"""Owns: one training run: config, plan, the loop and its state, precision, finiteness, batch split,
checkpoints, outputs, restarts, the worker, the inspection (the model built on the meta device and
probed, once per command), preflight and the session.
May import: strategies, launch, workload, measure, diagnosis, infra, errors
Imported by: advise, commands, compare, link, tune
"""

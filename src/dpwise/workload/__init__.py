"""Owns: the workload: its flags, the spec (model, data, loss), the model zoo and built-ins,
synthetic data, objectives, data, batches, misfits.
May import: infra, errors
Imported by: advise, commands, compare, train, tune
"""

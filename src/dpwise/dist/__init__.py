"""Owns: the distributed environment and the launch: torchrun's variables (env), the launch settings
and default timeout, the elastic launch, node addressing, the watch on the workers.
May import: infra, errors
Imported by: advise, cli, commands, compare, link, strategies, train
"""

"""Owns: the distributed environment and the launch: torchrun's variables (env), the schedulers'
(cluster: SLURM, Kubeflow, MPI, SkyPilot, the topology they and the flags resolve to), the launch
settings and default timeout, the elastic launch and what its failures say, the fork server its
processes come from, node addressing, the watch on the workers, the launcher's own connections
(agentlink).
May import: infra, errors
Imported by: advise, cli, commands, compare, link, strategies, train, tune, userscript, watch
"""

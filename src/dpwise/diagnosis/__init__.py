"""Owns: what in a model makes parallel runs differ or DDP fail (BatchNorm, random layers, unused
parameters), found by running it on a few rows.
May import: nothing of dpwise
Imported by: advise, compare, migrate, strategies, train, tune
"""

from dpwise.diagnosis.layers import Layer, group
from dpwise.diagnosis.probe import ModelProbe, probe_workload
from dpwise.diagnosis.unused import Unused

__all__ = ["Layer", "ModelProbe", "Unused", "group", "probe_workload"]

"""What in a model makes parallel runs differ or DDP fail, found by running it on a few rows."""

from dpwise.diagnosis.layers import Layer, group
from dpwise.diagnosis.probe import ModelProbe, probe_workload
from dpwise.diagnosis.unused import Unused

__all__ = ["Layer", "ModelProbe", "Unused", "group", "probe_workload"]

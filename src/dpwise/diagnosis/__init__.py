"""Owns: what in a model makes parallel runs differ or DDP fail (BatchNorm, random layers, unused
parameters), found by running it on a few rows.
May import: nothing of dpwise
Imported by: advise, compare, migrate, strategies, train, tune, userscript
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpwise.diagnosis.layers import Layer, group
    from dpwise.diagnosis.probe import ModelProbe, probe_workload
    from dpwise.diagnosis.unused import Unused

# Each name is imported when first asked for: the room's text (``layers.group``) is read by
# commands that never run a model (migrate), which should not wait for torch to import.
_HOMES = {
    "Layer": "layers",
    "group": "layers",
    "ModelProbe": "probe",
    "probe_workload": "probe",
    "Unused": "unused",
}

__all__ = ["Layer", "ModelProbe", "Unused", "group", "probe_workload"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)

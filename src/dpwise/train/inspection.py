"""The workload's model as a command's checks read it, made once per command: built on the meta
device (shapes only, no memory) and probed (run on the CPU for a few rows: random layers,
parameters used in some steps only). Preflight, compare's analysis and advise's estimate are
handed one Inspection rather than building the model again."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

    from dpwise.diagnosis import ModelProbe
    from dpwise.workload.spec import Workload


def meta_model(workload: Workload) -> nn.Module | None:
    """The workload's model built on the meta device (shapes only, no memory), or None where its
    factory cannot build there (its workers then find what the checks would)."""
    import torch

    try:
        with torch.device("meta"):
            return workload.build_model()
    except Exception:
        return None


class Inspection:
    """One command's look at its workload's model: each part made on first use, then kept."""

    def __init__(self, workload: Workload, seed: int) -> None:
        self.workload = workload
        self.seed = seed  # the probe builds the model from it, as every run does

    @cached_property
    def meta(self) -> nn.Module | None:
        """The model on the meta device; None where its factory cannot build there."""
        return meta_model(self.workload)

    @cached_property
    def structure(self) -> nn.Module:
        """The model for reading its structure: the meta one, or (a constructor that cannot run
        on the meta device) the workload's own inspection build, which raises what stops it."""
        meta = self.meta
        return meta if meta is not None else self.workload.build_for_inspection()

    @cached_property
    def probe(self) -> ModelProbe:
        """The model run for a few rows (dpwise.diagnosis): random layers, unused parameters."""
        from dpwise.diagnosis import probe_workload

        return probe_workload(self.workload, self.seed)

    @property
    def varying(self) -> str:
        """The layers whose parameters the probe found used in some steps only, as text ("" when
        none, or when the model could not be run)."""
        from dpwise.diagnosis import group

        return group(self.probe.unused.sometimes)

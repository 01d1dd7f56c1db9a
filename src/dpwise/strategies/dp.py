"""torch.nn.DataParallel: one process, the batch split over every visible GPU by threads."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch
from torch import nn

from dpwise.strategies.single import SingleStrategy
from dpwise.strategies.traits import VISIBLE, Traits

if TYPE_CHECKING:
    from dpwise.launch.env import DistEnv
    from dpwise.strategies.base import StrategyFacts, StrategySpec

CPU_PASS_THROUGH = (
    "dp on the CPU: torch.nn.DataParallel finds no GPU and calls the module directly, "
    "so this run equals the single-process run"
)


class DataParallelStrategy(SingleStrategy):
    """Single's behaviour (one process, whole global batch) with the model wrapped in DataParallel.

    Gradients are reduced onto ``device_ids[0]`` by an NCCL reduce (not on the CPU); on a CPU-only
    machine DataParallel is a pass-through.
    """

    traits = Traits(
        name="dp",
        summary="torch.nn.DataParallel: one process, the batch split over every visible GPU",
        multiprocess=False,
        process_group=False,
        devices=VISIBLE,
    )
    name = traits.name

    def __init__(self, gpus: int) -> None:
        super().__init__(torch.device("cuda", 0) if gpus else torch.device("cpu"))
        self.device_ids = list(range(gpus))

    @classmethod
    def from_spec(cls, spec: StrategySpec, env: DistEnv) -> DataParallelStrategy:
        return cls(spec.dp_devices)

    def wrap(self, model: nn.Module) -> nn.Module:
        if self.device_ids:
            return nn.DataParallel(model, device_ids=self.device_ids)
        return nn.DataParallel(model)

    def unwrap(self, model: nn.Module) -> nn.Module:
        return model.module if isinstance(model, nn.DataParallel) else model

    def memory_devices(self) -> list[torch.device]:
        return [torch.device("cuda", i) for i in self.device_ids] or [self.device]

    def synchronize(self) -> None:
        for device in self.memory_devices():
            if device.type == "cuda":
                torch.cuda.synchronize(device)

    def describe(self) -> StrategyFacts:
        facts = super().describe()
        return facts if self.device_ids else replace(facts, notes=(CPU_PASS_THROUGH,))

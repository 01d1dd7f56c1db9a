"""One process on one device: the reference every other strategy must reproduce."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch
from torch import nn

from dpwise.strategies.base import StrategyFacts, WholeModel
from dpwise.strategies.traits import OWN, Traits

if TYPE_CHECKING:
    from dpwise.launch.env import DistEnv
    from dpwise.strategies.base import StrategySpec


class SingleStrategy(WholeModel):
    traits = Traits(
        name="single",
        summary="one process on one device",
        multiprocess=False,
        process_group=False,
        devices=OWN,
        reference=True,
    )
    name = traits.name

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.rank = 0
        self.world_size = 1

    @classmethod
    def from_spec(cls, spec: StrategySpec, env: DistEnv) -> SingleStrategy:
        return cls(torch.device("cuda", 0) if spec.device_type == "cuda" else torch.device("cpu"))

    def setup(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        return rows

    def no_sync(self, model: nn.Module) -> AbstractContextManager[None]:
        return nullcontext()

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def all_gather_object(self, obj: object) -> list[object]:
        return [obj]

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @property
    def is_main(self) -> bool:
        return True

    def release(self, model: nn.Module) -> None:
        pass  # nothing holds a process group

    def teardown(self) -> None:
        pass

    def memory_devices(self) -> list[torch.device]:
        return [self.device]

    def describe(self) -> StrategyFacts:
        return StrategyFacts(devices=tuple(str(d) for d in self.memory_devices()), backend=None)

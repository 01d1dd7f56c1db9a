"""What a strategy is, as the rest of dpwise needs to know it: its traits, declared once.

Every strategy class carries one ``Traits``; plan, config, compare and the CLI ask these traits
and never compare strategy names. This module imports nothing heavy: the CLI reads names and
traits before torch is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

OWN = "own"
"""Memory is measured on the device of each process (one device per process)."""
VISIBLE = "visible"
"""Memory is measured on every GPU the one process drives (the CPU where it sees none)."""


@dataclass(frozen=True, kw_only=True)
class Traits:
    name: str
    """What --strategy and --strategies accept."""
    summary: str
    """One line for help texts."""
    multiprocess: bool
    """Several processes split each global batch: started by dpwise's launcher or torchrun,
    sized by --nproc/--nnodes (and compare's world sizes)."""
    process_group: bool
    """Needs torch.distributed's process group (compare gives a one-process run its own)."""
    devices: str = OWN
    """Which devices its memory is measured on: OWN or VISIBLE."""
    options: tuple[str, ...] = ()
    """TrainConfig fields only this strategy accepts (e.g. find_unused_parameters)."""
    reference: bool = False
    """The run every other strategy must reproduce (compare always runs it first)."""
    min_world_size: int = 1
    """The fewest processes it runs on (fsdp: 2; one process has nothing to shard over)."""
    shards_model: bool = False
    """Each process holds 1/W of the parameters, gradients and optimizer state (fsdp), not a
    whole replica: the memory estimate and the memory check read it."""
    shards_optimizer: str = ""
    """The option (one of ``options``) that shards the optimizer state over the processes,
    ZeRO-1 style (ddp: zero1, torch's ZeroRedundancyOptimizer); advise estimates it as a row
    of its own, named ``<name>+<option>``."""

    def __post_init__(self) -> None:
        if self.devices not in (OWN, VISIBLE):
            raise ValueError(f"devices must be {OWN!r} or {VISIBLE!r}, got {self.devices!r}")
        if self.min_world_size > 1 and not self.multiprocess:
            raise ValueError(f"{self.name}: a world of several processes needs multiprocess")
        if self.multiprocess and not self.process_group:
            raise ValueError(f"{self.name}: several processes need a process group")
        if self.shards_optimizer and self.shards_optimizer not in self.options:
            raise ValueError(f"{self.name}: shards_optimizer must be one of its options")

"""What advise --simulate runs: a case is a strategy with its settings (its row in the answer),
found from the strategies' traits, never from their names."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.advise import kinds
from dpwise.strategies import traits

RESHARD = "reshard_after_forward"  # the option that keeps units gathered when False


@dataclass(frozen=True)
class Case:
    """One row of the simulation: a strategy with its settings."""

    row: str  # "ddp", "ddp+zero1", "fsdp", "fsdp --no-reshard-after-forward"
    strategy: str
    shards_model: bool  # FSDP2's fully_shard; else DDP
    formula_row: str  # the estimate's row for its figure
    zero1: bool = False  # the optimizer state shared out by ZeroRedundancyOptimizer
    reshard_after_forward: bool = True
    precision: str = "fp32"  # "bf16"/"fp16": autocast, as dpwise trains
    formula: bool = True  # whether the formula models these settings
    device: str = "cpu"  # where the tensors live ("cuda:0": the calibration on a real GPU)


def cases(precision: str) -> list[Case]:
    """The cases advise weighs, from the strategies' traits: each process-per-device row of the
    estimate (kinds.memory_rows: ddp, ddp+zero1, fsdp), and a sharding strategy once more with
    its parameters kept gathered from forward to backward where it has that option."""
    found = []
    for row, strategy, sharded in kinds.memory_rows():
        kind = kinds.kind_of(strategy)
        if kind not in (kinds.REPLICA_PER_PROCESS, kinds.SHARD_PER_PROCESS):
            continue
        shards = kind == kinds.SHARD_PER_PROCESS
        found.append(Case(row, strategy, shards, row, sharded, precision=precision))
        if shards and RESHARD in traits(strategy).options:
            found.append(Case(f"{row} --no-reshard-after-forward", strategy, True, row,
                              reshard_after_forward=False, precision=precision,
                              formula=False))  # fmt: skip
    return found

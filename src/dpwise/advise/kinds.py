"""What advise derives from a strategy's traits: how many devices it spans, which memory model
estimates it, and the line a user adds to their own script for it.

Advise never compares strategy names to decide these: a strategy registered tomorrow with the
traits of one of these kinds is estimated and launched like it.
"""

from __future__ import annotations

from dpwise.strategies import names, traits
from dpwise.strategies.traits import VISIBLE, Traits

ONE_DEVICE = "one-device"
"""One process on one device trains the whole batch (single)."""
ONE_PROCESS_MANY_DEVICES = "one-process-many-devices"
"""One process drives every visible GPU of a node, scattering each batch (DataParallel)."""
REPLICA_PER_PROCESS = "replica-per-process"
"""A process per device, each holding the whole model and exchanging gradients (DDP)."""
SHARD_PER_PROCESS = "shard-per-process"
"""A process per device, each holding 1/W of the model states (FSDP)."""


def kind(t: Traits) -> str:
    """The memory model and device count that follow from the traits."""
    if t.multiprocess:
        return SHARD_PER_PROCESS if t.shards_model else REPLICA_PER_PROCESS
    return ONE_PROCESS_MANY_DEVICES if t.devices == VISIBLE else ONE_DEVICE


def kind_of(strategy: str) -> str:
    return kind(traits(strategy))


def devices(strategy: str, world: int, one_node: int) -> int:
    """How many devices ``strategy`` spans: ``world`` (every GPU of every node) for a process per
    device, ``one_node`` (the GPUs of one node) for one process driving them, else one."""
    k = kind_of(strategy)
    if k in (REPLICA_PER_PROCESS, SHARD_PER_PROCESS):
        return world
    return one_node if k == ONE_PROCESS_MANY_DEVICES else 1


def memory_rows() -> list[tuple[str, str, bool]]:
    """The rows of advise's memory estimate, as (row, strategy, optimizer sharded): every
    registered strategy, and each that can shard its optimizer state (its ``shards_optimizer``
    option) once more with it sharded, as ``<name>+<option>`` (ddp+zero1)."""
    rows = []
    for name in names():
        rows.append((name, name, False))
        option = traits(name).shards_optimizer
        if option:
            rows.append((f"{name}+{option}", name, True))
    return rows


SCRIPT_HINTS = {
    ONE_DEVICE: "",
    ONE_PROCESS_MANY_DEVICES: "  # model = torch.nn.DataParallel(model)",
    REPLICA_PER_PROCESS: "",
    SHARD_PER_PROCESS: "  # model = torch.distributed.fsdp.fully_shard(...) per block",
}


def script_hint(strategy: str) -> str:
    """A comment for the user's own launch line: what their script needs for this kind."""
    return SCRIPT_HINTS[kind_of(strategy)]

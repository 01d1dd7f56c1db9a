"""The run filters: which runs of a comparison are of DataParallel's kind, DDP's or FSDP's, read
from each run's strategy traits (never from its name). The checks, the verdict, the projection and
the report ask these."""

from __future__ import annotations

from collections.abc import Iterable

from dpwise import strategies
from dpwise.results.records import Run
from dpwise.strategies.traits import VISIBLE, Traits


def one_process_many_devices(runs: Iterable[Run]) -> list[Run]:
    """Runs of a one-process strategy that drives every visible device (DataParallel's kind):
    one side of the guide's DataParallel-versus-DDP claims."""
    return [r for r in runs if strategies.traits(r.strategy).devices == VISIBLE]


def one_process_per_device(runs: Iterable[Run]) -> list[Run]:
    """Runs of a strategy with a process per device, a process group and a whole replica of the
    model in each process (DDP's kind): the other side of those claims. A strategy that shards
    the model (FSDP's kind) is not DDP's kind: see sharded."""
    return [r for r in runs if _replicates(strategies.traits(r.strategy))]


def sharded(runs: Iterable[Run]) -> list[Run]:
    """Runs of a strategy that shards parameters, gradients and optimizer state over its
    processes (FSDP's kind): what the memory check holds against one_process_per_device."""
    return [r for r in runs if strategies.traits(r.strategy).shards_model]


def _replicates(t: Traits) -> bool:
    return t.multiprocess and t.process_group and not t.shards_model

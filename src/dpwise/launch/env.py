"""The distributed environment a worker runs in: torchrun's variables (RANK, LOCAL_RANK,
WORLD_SIZE …), set by torchrun or, for a process a scheduler started per device, by dpwise itself
(launch.cluster's worker variables). The schedulers' own variables are read in launch.cluster."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dpwise.errors import DpwiseError
from dpwise.launch.cluster.elastic import is_worker
from dpwise.launch.cluster.topology import SCHEDULER_ENV

_INT_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TORCHELASTIC_RESTART_COUNT",
)


@dataclass(frozen=True, kw_only=True)
class DistEnv:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    run_id: str | None = None
    under_launcher: bool = False
    """True inside a worker started by torchrun / torch.distributed's elastic launcher."""
    restart_count: int = 0
    """How often the launcher restarted this worker group (TORCHELASTIC_RESTART_COUNT)."""
    launched_by: str = "torchrun"
    """Who started this worker: torchrun (or dpwise's own launch), or a scheduler (slurm, mpi)."""
    device_index: int = 0
    """This worker's GPU among the visible ones: its local rank, or 0 where the scheduler
    shows each process only its own GPU (CUDA_VISIBLE_DEVICES with one entry)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        env = os.environ if environ is None else environ
        # A launcher's worker always has its rank; TORCHELASTIC_RUN_ID alone is a leftover (a
        # shell that once ran under torchrun, a copied environment): ignored, not a worker.
        # RANK and WORLD_SIZE without LOCAL_RANK are no worker either (Kubeflow sets them to
        # the pod's index before any launcher runs).
        if not is_worker(env):
            return cls()
        values = {}
        for name in _INT_VARS:
            raw = env.get(name)
            if raw is None:
                continue
            try:
                values[name] = int(raw)
            except ValueError:
                raise DpwiseError(
                    f"environment variable {name}={raw!r} is not an integer"
                ) from None
        world = values.get("WORLD_SIZE", 1)
        local_rank = values.get("LOCAL_RANK", 0)
        visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        return cls(
            rank=values.get("RANK", 0),
            local_rank=local_rank,
            world_size=world,
            local_world_size=values.get("LOCAL_WORLD_SIZE", world),
            node_rank=values.get("GROUP_RANK", 0),
            restart_count=values.get("TORCHELASTIC_RESTART_COUNT", 0),
            run_id=env.get("TORCHELASTIC_RUN_ID"),
            under_launcher=True,
            launched_by=env.get(SCHEDULER_ENV) or "torchrun",
            device_index=0 if len(visible) == 1 else local_rank,
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

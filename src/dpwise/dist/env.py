"""The distributed environment a process runs in. The only reader of torchrun's variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dpwise.errors import DpwiseError

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

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        env = os.environ if environ is None else environ
        # A launcher's worker always has its rank; TORCHELASTIC_RUN_ID alone is a leftover (a
        # shell that once ran under torchrun, a copied environment): ignored, not a worker.
        ranked = "RANK" in env or "LOCAL_RANK" in env
        under = ("TORCHELASTIC_RUN_ID" in env and ranked) or (
            "LOCAL_RANK" in env and "WORLD_SIZE" in env
        )
        if not under:
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
        return cls(
            rank=values.get("RANK", 0),
            local_rank=values.get("LOCAL_RANK", 0),
            world_size=world,
            local_world_size=values.get("LOCAL_WORLD_SIZE", world),
            node_rank=values.get("GROUP_RANK", 0),
            restart_count=values.get("TORCHELASTIC_RESTART_COUNT", 0),
            run_id=env.get("TORCHELASTIC_RUN_ID"),
            under_launcher=True,
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

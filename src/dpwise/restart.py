"""Which checkpoint a worker starts from: none, --resume's, or after a restart the run's latest.

The elastic launcher restarts every worker of the group when one fails (--max-restarts). A
restarted worker continues from the newest checkpoint THIS launch wrote (each checkpoint names
the launch's run id), so a checkpoint left in --out by an earlier run is never mistaken for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpwise import checkpoint
from dpwise.atomic import remove_stale_temporaries
from dpwise.config import TrainConfig
from dpwise.launch_env import DistEnv


@dataclass(frozen=True)
class Attempt:
    """One start of the workers: the launch's run id, its restart count, where it resumes."""

    run_id: str | None = None
    restart: int = 0
    state: dict[str, Any] | None = None  # the checkpoint to resume from; None: step 0
    label: str = ""  # how messages name that checkpoint
    notice: str | None = None  # rank 0 says it on a restart


def _load(cfg: TrainConfig, path: Path, label: str) -> dict[str, Any]:
    return checkpoint.load(path, checkpoint.fingerprint(cfg.to_dict()), label)


def first_attempt(cfg: TrainConfig, run_id: str | None = None) -> Attempt:
    if cfg.resume is None:
        return Attempt(run_id=run_id)
    label = f"--resume {cfg.resume}"
    return Attempt(run_id=run_id, state=_load(cfg, cfg.resume, label), label=label)


def attempt_for(cfg: TrainConfig, env: DistEnv) -> Attempt:
    """This worker's start; on a restart, the latest checkpoint of this launch, if it wrote one."""
    first = first_attempt(cfg, env.run_id)
    n = env.restart_count
    if n == 0:
        return first
    latest = cfg.checkpoint_path
    if latest is not None and env.is_main:
        remove_stale_temporaries(latest.parent)  # a write the failure interrupted
    if latest is not None and latest.is_file():
        label = f"restart {n}: {latest}"
        state = _load(cfg, latest, label)
        if state.get("run_id") == env.run_id:
            return Attempt(env.run_id, n, state, label, _resuming(n, state, latest))
    if first.state is not None:
        return Attempt(
            env.run_id, n, first.state, first.label, _resuming(n, first.state, cfg.resume)
        )
    return Attempt(
        env.run_id, n, notice=f"restart {n}: no checkpoint yet; starting again from step 0"
    )


def _resuming(n: int, state: dict[str, Any], path: Path | None) -> str:
    name = path.name if path is not None else "the checkpoint"
    return f"restart {n}: resuming from step {state['position']['global_steps']} of {name}"

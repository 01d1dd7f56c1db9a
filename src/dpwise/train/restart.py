"""Which checkpoint a worker starts from: none, --resume's, or after a restart the run's latest.

The elastic launcher restarts every worker of the group when one fails (--max-restarts). A
restarted worker continues from the newest checkpoint THIS launch wrote (each checkpoint names
the launch's run id), so a checkpoint left in --out by an earlier run is never mistaken for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpwise.infra.atomic import remove_stale_temporaries
from dpwise.launch.env import DistEnv
from dpwise.train import checkpoint
from dpwise.train.checkpoint import Checkpoint
from dpwise.train.config import TrainConfig


@dataclass(frozen=True)
class Attempt:
    """One start of the workers: the launch's run id, its restart count, where it resumes."""

    run_id: str | None = None
    restart: int = 0
    state: Checkpoint | None = None  # the checkpoint to resume from; None: step 0
    label: str = ""  # how messages name that checkpoint
    notice: str | None = None  # rank 0 says it on a restart


def _load(cfg: TrainConfig, path: Path, label: str) -> Checkpoint:
    return checkpoint.load(path, checkpoint.fingerprint(cfg.to_dict()), label)


def first_attempt(
    cfg: TrainConfig, run_id: str | None = None, resumed: Checkpoint | None = None
) -> Attempt:
    """``resumed``: --resume's checkpoint, already loaded and checked by the caller."""
    if cfg.resume is None:
        return Attempt(run_id=run_id)
    label = f"--resume {cfg.resume}"
    state = resumed if resumed is not None else _load(cfg, cfg.resume, label)
    return Attempt(run_id=run_id, state=state, label=label)


def attempt_for(cfg: TrainConfig, env: DistEnv, resumed: Checkpoint | None = None) -> Attempt:
    """This worker's start; on a restart, the latest checkpoint of this launch, if it wrote one.
    Each file is read at most once: --resume's only when the start needs it."""
    n = env.restart_count
    if n == 0:
        return first_attempt(cfg, env.run_id, resumed)
    latest = cfg.checkpoint_path
    if latest is not None and env.is_main:
        remove_stale_temporaries(latest.parent)  # a write the failure interrupted
    if latest is not None and latest.is_file():
        label = f"restart {n}: {latest}"
        state = _load(cfg, latest, label)
        if state.get("run_id") == env.run_id:
            return Attempt(env.run_id, n, state, label, _resuming(n, state, latest))
        if resumed is None and cfg.resume is not None and _same_file(cfg.resume, latest):
            resumed = state  # --resume's file, not yet overwritten by this launch
    first = first_attempt(cfg, env.run_id, resumed)
    if first.state is not None:
        return Attempt(
            env.run_id, n, first.state, first.label, _resuming(n, first.state, cfg.resume)
        )
    return Attempt(
        env.run_id, n, notice=f"restart {n}: no checkpoint yet; starting again from step 0"
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _resuming(n: int, state: Checkpoint, path: Path | None) -> str:
    name = path.name if path is not None else "the checkpoint"
    return f"restart {n}: resuming from step {state['position']['global_steps']} of {name}"

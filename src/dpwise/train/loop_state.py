"""What a checkpoint holds of a training Loop, and how a Loop takes it back.

Besides the model, optimizer, scaler, every rank's random generators and every rank's state of
the strategy's communication hook (PowerSGD's error feedback), a checkpoint holds the
run's history: the losses and records of finished epochs, and the losses (and seconds) of the
epoch under way, so that a run resumed mid-epoch reports the whole run, as if never stopped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from dpwise.errors import DpwiseError
from dpwise.train import checkpoint

if TYPE_CHECKING:
    from torch import nn

    from dpwise.strategies.base import Strategy
    from dpwise.train.config import TrainConfig
    from dpwise.train.precision import Precision
    from dpwise.train.result import RunResult


class Loop(Protocol):
    """What a checkpoint reads of a training loop and restores into it (engine.Loop answers)."""

    cfg: TrainConfig
    strategy: Strategy
    model: nn.Module  # wrapped
    optimizer: torch.optim.Optimizer
    precision: Precision
    result: RunResult  # the losses, epoch records and step count so far
    run_id: str | None  # the launch that writes this run's checkpoints
    epoch: int  # 0-based, the epoch under way
    step_in_epoch: int
    carry: tuple[list[float], float]  # the epoch's losses and seconds before a resume
    steps: int  # optimizer steps per epoch

    @property
    def total_steps(self) -> int: ...

    def settle(self) -> None: ...


_NO_PART: dict[str, Any] = {"losses": [], "seconds": 0.0}


def _rng_state(loop: Loop) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if loop.strategy.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(loop.strategy.device)
    return state


def _history(
    loop: Loop, live: torch.Tensor | None, live_seconds: float
) -> tuple[list[float], list[dict[str, Any]], dict[str, Any]]:
    """(losses, records) of finished epochs and the unfinished epoch's part; collective if live."""
    losses, epochs = list(loop.result.losses), [dict(e) for e in loop.result.epochs]
    carried, seconds = loop.carry
    if live is not None:
        done = loop.strategy.all_reduce_mean(live).tolist() if len(live) else []
        return losses, epochs, {"losses": carried + done, "seconds": seconds + live_seconds}
    if loop.step_in_epoch and epochs and epochs[-1]["epoch"] == loop.epoch + 1:
        cut = epochs.pop()  # an epoch ended early by --max-steps: the next run completes it
        keep = len(losses) - cut["steps"]
        return losses[:keep], epochs, {"losses": losses[keep:], "seconds": cut["seconds"]}
    return losses, epochs, dict(_NO_PART)


def save(loop: Loop, live: torch.Tensor | None, live_seconds: float) -> None:
    rng = loop.strategy.all_gather_object(_rng_state(loop))  # every rank's generator
    losses, epochs, partial = _history(loop, live, live_seconds)
    model = loop.strategy.full_state_dict(loop.model)  # every rank: a sharded model gathers
    optimizer = loop.strategy.optimizer_state_dict(loop.model, loop.optimizer)
    hook = loop.strategy.hook_state_dict(loop.model)  # every rank's (PowerSGD's error feedback)
    if not loop.strategy.is_main:
        return
    state = {
        "run_id": loop.run_id,
        "fingerprint": checkpoint.fingerprint(loop.cfg.to_dict()),
        "model": model,
        "optimizer": optimizer,
        "scaler": loop.precision.state_dict(),
        "hook": hook,
        "rng": rng,
        "position": {
            "epoch": loop.epoch,
            "step_in_epoch": loop.step_in_epoch,
            "global_steps": loop.result.global_steps,
        },
        "losses": losses,
        "epochs": epochs,
        "partial_epoch": partial,
    }
    checkpoint.save(loop.cfg.checkpoint_path, state)


def restore(loop: Loop, state: dict[str, Any], label: str) -> None:
    """Check that ``state`` continues this run, then load it; a misfit is one DpwiseError line."""
    checkpoint.check_position(state, label, loop.steps, loop.total_steps)
    checkpoint.check_model(state, label, loop.strategy.unwrap(loop.model))
    try:
        # first: settling the wrapper runs the model (its generators, its buffers)
        loop.strategy.load_hook_state_dict(loop.model, state.get("hook"), loop.settle)
        loop.strategy.load_full_state_dict(loop.model, state["model"])
        loop.strategy.load_optimizer_state_dict(loop.model, loop.optimizer, state["optimizer"])
        loop.precision.load_state_dict(state["scaler"])
        _restore_rng(loop, state["rng"])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise DpwiseError(f"{label}: the checkpoint does not fit this run: {reason}") from None
    pos = state["position"]
    loop.epoch, loop.step_in_epoch = pos["epoch"], pos["step_in_epoch"]
    loop.result.global_steps = pos["global_steps"]
    loop.result.resumed_at_step = pos["global_steps"]
    loop.result.losses = list(state["losses"])
    loop.result.epochs = [dict(e) for e in state["epochs"]]
    partial = state.get("partial_epoch") or _NO_PART
    loop.carry = (list(partial["losses"]), float(partial["seconds"]))


def _restore_rng(loop: Loop, rngs: list[dict[str, torch.Tensor]]) -> None:
    rank = loop.strategy.rank
    rng = rngs[rank] if rank < len(rngs) else rngs[0]
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and loop.strategy.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], loop.strategy.device)

"""What a checkpoint holds of a training loop, and how the loop takes it back: the loop's own
``state_dict()`` and ``load_state_dict()`` (engine.Loop inherits them from LoopState).

Besides the model, optimizer, scaler, every rank's random generators and every rank's state of
the strategy's communication hook (PowerSGD's error feedback), a checkpoint holds the
run's history: the losses and records of finished epochs, and the losses (and seconds) of the
epoch under way, so that a run resumed mid-epoch reports the whole run, as if never stopped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from dpwise.errors import DpwiseError
from dpwise.train import checkpoint
from dpwise.train.checkpoint import Checkpoint, PartialEpoch

if TYPE_CHECKING:
    from torch import nn

    from dpwise.strategies.base import Strategy
    from dpwise.train.config import TrainConfig
    from dpwise.train.precision import Precision
    from dpwise.train.result import EpochRecord, RunResult

History = tuple[list[float], list["EpochRecord"], PartialEpoch]


class LoopState:
    """The part of the training loop a checkpoint saves and restores. The loop's own fields,
    read and written only by its own methods (these, and engine.Loop's)."""

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
    def total_steps(self) -> int:
        raise NotImplementedError

    def settle(self) -> None:
        raise NotImplementedError

    def state_dict(
        self, live: torch.Tensor | None = None, live_seconds: float = 0.0
    ) -> Checkpoint | None:
        """The checkpoint of the run so far; ``live``: this epoch's losses so far. Every rank
        calls it (it gathers); the main process gets the state, the others None."""
        rng = self.strategy.all_gather_object(_rng_state(self.strategy.device))
        losses, epochs, partial = self._history(live, live_seconds)
        model = self.strategy.full_state_dict(self.model)  # every rank: a sharded model gathers
        optimizer = self.strategy.optimizer_state_dict(self.model, self.optimizer)
        hook = self.strategy.hook_state_dict(self.model)  # every rank's (PowerSGD's feedback)
        if not self.strategy.is_main:
            return None
        return Checkpoint(
            run_id=self.run_id,
            fingerprint=checkpoint.fingerprint(self.cfg.to_dict()),
            model=model,
            optimizer=optimizer,
            scaler=self.precision.state_dict(),
            hook=hook,
            rng=cast("list[dict[str, torch.Tensor]]", rng),  # what each rank gave
            position=checkpoint.Position(
                epoch=self.epoch,
                step_in_epoch=self.step_in_epoch,
                global_steps=self.result.global_steps,
            ),
            losses=losses,
            epochs=epochs,
            partial_epoch=partial,
        )

    def _history(self, live: torch.Tensor | None, live_seconds: float) -> History:
        """(losses, records) of finished epochs and the unfinished epoch's part; collective if
        ``live``."""
        losses = list(self.result.losses)
        epochs: list[EpochRecord] = [e.copy() for e in self.result.epochs]
        carried, seconds = self.carry
        if live is not None:
            done = self.strategy.all_reduce_mean(live).tolist() if len(live) else []
            return (
                losses,
                epochs,
                PartialEpoch(losses=carried + done, seconds=seconds + live_seconds),
            )
        if self.step_in_epoch and epochs and epochs[-1]["epoch"] == self.epoch + 1:
            cut = epochs.pop()  # an epoch ended early by --max-steps: the next run completes it
            keep = len(losses) - cut["steps"]
            return losses[:keep], epochs, PartialEpoch(losses=losses[keep:], seconds=cut["seconds"])
        return losses, epochs, PartialEpoch(losses=[], seconds=0.0)

    def load_state_dict(self, state: Checkpoint, label: str) -> None:
        """Check that ``state`` continues this run, then load it; a misfit is one DpwiseError
        line (``label``: how it names the checkpoint)."""
        checkpoint.check_position(state, label, self.steps, self.total_steps)
        checkpoint.check_model(state, label, self.strategy.unwrap(self.model))
        try:
            # first: settling the wrapper runs the model (its generators, its buffers)
            self.strategy.load_hook_state_dict(self.model, state.get("hook"), self.settle)
            self.strategy.load_full_state_dict(self.model, state["model"])
            self.strategy.load_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])
            self.precision.load_state_dict(state["scaler"])
            _restore_rng(self.strategy, state["rng"])
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            raise DpwiseError(f"{label}: the checkpoint does not fit this run: {reason}") from None
        pos = state["position"]
        self.epoch, self.step_in_epoch = pos["epoch"], pos["step_in_epoch"]
        self.result.global_steps = pos["global_steps"]
        self.result.resumed_at_step = pos["global_steps"]
        self.result.losses = list(state["losses"])
        self.result.epochs = [e.copy() for e in state["epochs"]]
        partial = state.get("partial_epoch") or PartialEpoch(losses=[], seconds=0.0)
        self.carry = (list(partial["losses"]), float(partial["seconds"]))


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _restore_rng(strategy: Strategy, rngs: list[dict[str, torch.Tensor]]) -> None:
    rank = strategy.rank
    rng = rngs[rank] if rank < len(rngs) else rngs[0]
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and strategy.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], strategy.device)

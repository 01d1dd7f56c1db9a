"""The training loop: one loop for every strategy. Differences live behind the Strategy."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import torch

from dpwise.errors import DpwiseError
from dpwise.launch import netaddr
from dpwise.launch.failures import record_before_teardown
from dpwise.measure import memory
from dpwise.strategies.base import Strategy
from dpwise.train import checkpoint, finite
from dpwise.train.loop_state import LoopState
from dpwise.train.plan import RunPlan
from dpwise.train.precision import Precision
from dpwise.train.restart import Attempt, first_attempt
from dpwise.train.result import (
    EpochRecord,
    EpochReport,
    PeakRecord,
    RunResult,
    Trained,
    WorkerRecord,
)
from dpwise.workload import batches
from dpwise.workload.data import BatchSource, epoch_permutation, micro_batch_rows
from dpwise.workload.spec import Workload


def make_optimizer(
    name: str, params: Any, lr: float, momentum: float, wd: float, shard: bool = False
) -> torch.optim.Optimizer:
    """The optimizer; ``shard``: ZeRO-1, each process keeps the state of its share of the
    parameters (torch's ZeroRedundancyOptimizer: the same updates, then a broadcast)."""
    kind: type[torch.optim.Optimizer]
    kwargs: dict[str, Any]
    if name == "adamw":
        kind, kwargs = torch.optim.AdamW, {"lr": lr, "weight_decay": wd}
    else:
        kind, kwargs = torch.optim.SGD, {"lr": lr, "momentum": momentum, "weight_decay": wd}
    if not shard:
        return kind(params, **kwargs)
    from torch.distributed.optim import ZeroRedundancyOptimizer

    return ZeroRedundancyOptimizer(params, optimizer_class=kind, **kwargs)


def steps_per_epoch(rows: int, batch_size: int, accum_steps: int) -> int:
    steps = rows // (batch_size * accum_steps)
    if steps == 0:
        raise DpwiseError(
            f"the data set has {rows} samples, fewer than one optimizer step needs "
            f"(batch size {batch_size} × {accum_steps} accumulation step(s)); use a smaller "
            "--batch-size"
        )
    return steps


class Loop(LoopState):
    """Runs epochs of optimizer steps; each step is K micro-steps over contiguous global rows.
    Its state (what a checkpoint holds) is its own: ``state_dict``, ``load_state_dict``."""

    def __init__(
        self,
        plan: RunPlan,
        strategy: Strategy,
        workload: Workload,
        on_epoch: Callable[[EpochReport], None] | None = None,
        data: BatchSource | None = None,
        stop_on_nonfinite: bool = True,
    ) -> None:
        self.cfg = plan.config
        self.strategy = strategy
        self.on_epoch = on_epoch
        self.data: BatchSource = data if data is not None else workload.load_data(self.cfg.seed)
        self.steps = steps_per_epoch(len(self.data), self.cfg.batch_size, self.cfg.accum_steps)
        torch.manual_seed(self.cfg.seed)  # the same initial state on every rank and strategy
        base = strategy.place(workload.build_model())
        if self.cfg.compile:
            base.compile()  # in place: the module and its state dict's names stay the model's
        self.model = strategy.wrap(base)
        self.optimizer = make_optimizer(
            self.cfg.optimizer,
            self.model.parameters(),
            self.cfg.lr,
            self.cfg.momentum,
            self.cfg.weight_decay,
            shard=self.cfg.zero1,
        )
        self.precision = Precision(self.cfg.precision, strategy.device.type)
        self.workload = workload
        self.objective = workload.objective()  # mean-reduced: the equivalence contract needs it
        self.objective.all_labels = self.data.y  # every label checked with the first batch
        facts = strategy.describe()
        self.result = RunResult(
            strategy=strategy.name,
            world_size=strategy.world_size,
            backend=facts.backend,
            device=str(strategy.device),
            devices=list(facts.devices),
            notes=list(facts.notes),
            sharded_units=None if facts.sharded_units is None else list(facts.sharded_units),
            steps_per_epoch=self.steps,
            rows_dropped_per_epoch=len(self.data)
            - self.steps * self.cfg.batch_size * self.cfg.accum_steps,
        )
        self.epoch, self.step_in_epoch = 0, 0
        self.run_id: str | None = None  # the launch that writes this run's checkpoints
        self.carry: tuple[list[float], float] = ([], 0.0)  # this epoch's steps before a resume
        self.stop_on_nonfinite = stop_on_nonfinite
        self.watch = finite.LossWatch(strategy.device)
        self._perm = torch.empty(0, dtype=torch.long)

    # -- one optimizer step -------------------------------------------------------------------
    def step(self, perm: torch.Tensor, step: int) -> torch.Tensor:
        """One optimizer step (K micro-steps); returns this process's loss."""
        k = self.cfg.accum_steps
        total = torch.zeros((), device=self.strategy.device)
        for micro in range(k):
            x, y = self._batch(micro_batch_rows(perm, step, micro, self.cfg.batch_size, k))
            sync = self.strategy.no_sync(self.model) if micro < k - 1 else nullcontext()
            with sync:
                with self.precision.autocast():
                    loss = self.workload.loss(self.model, x, y, self.objective)
                    if k > 1:
                        loss = loss / k
                self.precision.backward(loss)
            total += loss.detach().float()
        self.precision.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def _batch(self, rows: torch.Tensor) -> tuple[Any, torch.Tensor | None]:
        """This process's share of the global ``rows``, on its device."""
        x, y = self.data.get(self.strategy.shard(rows))
        x = batches.to_device(x, self.strategy.device)
        return x, None if y is None else y.to(self.strategy.device, non_blocking=True)

    def settle(self) -> None:
        """One forward and backward of the first micro-batch, its gradients dropped and no step
        taken: what a wrapper lays out in its first backward (DDP's buckets) is laid out. A
        resume runs it before it loads the model, the generators and the hook's state."""
        perm = epoch_permutation(len(self.data), self.cfg.seed, 0)
        x, y = self._batch(micro_batch_rows(perm, 0, 0, self.cfg.batch_size, self.cfg.accum_steps))
        with self.precision.autocast():
            loss = self.workload.loss(self.model, x, y, self.objective)
        loss.backward()
        self.optimizer.zero_grad(set_to_none=True)

    # -- one epoch ------------------------------------------------------------------------------
    def _epoch(self, budget: int) -> None:
        perm = epoch_permutation(len(self.data), self.cfg.seed, self.epoch)
        first = self.step_in_epoch
        last = min(self.steps, first + budget)
        losses = torch.zeros(last - first, device=self.strategy.device)
        self._perm = perm
        self.strategy.synchronize()
        start = time.perf_counter()
        for step in range(first, last):
            loss = losses[step - first] = self.step(perm, step)
            self.result.global_steps += 1
            self.step_in_epoch = step + 1
            where = finite.Where(self.result.global_steps, self.epoch + 1, step + 1)
            self._nonfinite(self.watch.see(loss, where))
            if self._checkpoint_due():
                self._nonfinite(self.watch.flush())  # no checkpoint of weights a NaN updated
                self.save_checkpoint(losses[: step - first + 1], time.perf_counter() - start)
        self._nonfinite(self.watch.flush())
        self.strategy.synchronize()
        seconds = time.perf_counter() - start
        step_losses = self.strategy.all_reduce_mean(losses).tolist() if last > first else []
        self._finish_epoch(seconds, step_losses)

    def _nonfinite(self, found: finite.Found) -> None:
        """The first NaN or infinite loss: stop with one line, or (compare) record it."""
        if found is None:
            return
        value, where = found
        step, k = where.step_in_epoch - 1, self.cfg.accum_steps
        batch = (
            self.data.get(
                self.strategy.shard(micro_batch_rows(self._perm, step, m, self.cfg.batch_size, k))
            )
            for m in range(k)
        )
        rank, world = self.strategy.rank, self.strategy.world_size
        record = finite.divergence(value, where, self.watch, batch, self.cfg, rank, world)
        if self.stop_on_nonfinite:
            raise DpwiseError(record.message())
        self.result.diverged = record.to_dict()

    def _finish_epoch(self, seconds: float, step_losses: list[float]) -> None:
        carried, carried_seconds = self.carry  # the part of this epoch before a resume
        self.carry = ([], 0.0)
        step_losses, seconds = carried + step_losses, carried_seconds + seconds
        self.result.losses.extend(step_losses)
        steps = len(step_losses)
        samples = steps * self.cfg.batch_size * self.cfg.accum_steps
        report = EpochReport(
            epoch=self.epoch + 1,
            epochs=self.cfg.epochs,
            steps=steps,
            samples=samples,
            seconds=seconds,
            mean_loss=sum(step_losses) / max(1, len(step_losses)),
        )
        self.result.epochs.append(
            EpochRecord(
                epoch=report.epoch,
                steps=steps,
                samples=samples,
                seconds=seconds,
                samples_per_s=report.samples_per_s,
                mean_loss=report.mean_loss,
            )
        )
        if self.step_in_epoch >= self.steps:
            self.epoch, self.step_in_epoch = self.epoch + 1, 0
        if self.on_epoch is not None and self.strategy.is_main:
            self.on_epoch(report)

    @property
    def total_steps(self) -> int:
        total = self.cfg.epochs * self.steps
        return total if self.cfg.max_steps is None else min(total, self.cfg.max_steps)

    def run(self) -> Trained:
        total = self.total_steps
        devices = [torch.device(d) for d in self.result.devices]
        memory.reset_peaks(devices)
        self.watch.remember(self.result.losses)  # a resumed run's losses before its restart
        while self.result.global_steps < total and self.epoch < self.cfg.epochs:
            self._epoch(total - self.result.global_steps)
        trained = self.result.global_steps != self.result.resumed_at_step
        if not trained and self.carry[0]:  # resumed at its last step: the cut epoch's losses
            self._finish_epoch(0.0, [])
        if self.cfg.checkpoint_every is not None and trained and not self._checkpoint_due():
            self.save_checkpoint()
        self.result.peak_memory = _gathered_peaks(self.strategy, devices)
        self.result.workers = _gathered_workers(self.strategy)
        state = self.strategy.full_state_dict(self.model)  # every process: it may gather
        return Trained(self.result, self.strategy.unwrap(self.model), state)

    # -- checkpoints ----------------------------------------------------------------------------
    def _checkpoint_due(self) -> bool:
        every = self.cfg.checkpoint_every
        return every is not None and self.result.global_steps % every == 0

    def save_checkpoint(self, live: torch.Tensor | None = None, live_seconds: float = 0.0) -> None:
        """Every rank calls it (it gathers); rank 0 writes. ``live``: this epoch's losses so far."""
        state = self.state_dict(live, live_seconds)
        if state is not None:
            assert self.cfg.checkpoint_path is not None  # --checkpoint-every needs --out
            checkpoint.save(self.cfg.checkpoint_path, state)


def _gathered_peaks(strategy: Strategy, devices: list[torch.device]) -> list[PeakRecord]:
    """Every rank's peak memory per device (dpwise.measure.memory), with its rank."""
    gathered = cast(
        "list[list[dict[str, object]]]", strategy.all_gather_object(memory.peaks(devices))
    )
    return [
        cast(PeakRecord, {"rank": rank, **p}) for rank, peaks in enumerate(gathered) for p in peaks
    ]


def _gathered_workers(strategy: Strategy) -> list[WorkerRecord]:
    """Every rank's process: its pid, host, address and threads."""
    mine = (os.getpid(), socket.gethostname(), netaddr.worker_address(), torch.get_num_threads())
    gathered = cast("list[tuple[int, str, str | None, int]]", strategy.all_gather_object(mine))
    return [
        WorkerRecord(rank=rank, pid=pid, host=host, address=address, threads=threads)
        for rank, (pid, host, address, threads) in enumerate(gathered)
    ]


def train(
    plan: RunPlan,
    strategy: Strategy,
    workload: Workload,
    on_epoch: Callable[[EpochReport], None] | None = None,
    on_trained: Callable[[Trained], None] | None = None,
    before_teardown: Callable[[], None] | None = None,
    attempt: Attempt | None = None,
) -> Trained:
    """Set up the strategy, train, tear down. Resumes from ``attempt``'s checkpoint, if any:
    --resume's, or after a restart the run's latest (default: --resume's, when given).

    The end of a run has a fixed order: ``on_trained`` (rank 0 writes its outputs, so they
    never wait on the process group), ``strategy.release`` (every process arrives, outstanding
    communication completes, the wrapper dies while the group lives: see DDPStrategy.teardown),
    ``before_teardown`` (e.g. a time limit on what follows), then ``strategy.teardown``.
    """
    attempt = attempt if attempt is not None else first_attempt(plan.config)
    strategy.setup()
    try:
        loop = Loop(plan, strategy, workload, on_epoch)
        loop.run_id, loop.result.restarts = attempt.run_id, attempt.restart
        if attempt.state is not None:
            loop.load_state_dict(attempt.state, attempt.label)
        trained = loop.run()
        if on_trained is not None:
            on_trained(trained)
        strategy.release(loop.model)
        del loop  # the last reference to the wrapper: it dies here, while the group is alive
        if before_teardown is not None:
            before_teardown()
        return trained
    except BaseException as exc:
        record_before_teardown(exc)  # the peers fail as the group goes: this error comes first
        raise
    finally:
        strategy.teardown()

"""The search, as every worker runs it: calibrate the steps, then rounds of the default and the
candidates still measured, until every candidate is decided or the budget is spent.

Rank 0 decides (its journal is the search's); after every round it sends the journal to the
other workers, so that every worker trains the same configurations in the same order. A
candidate that fails while it trains is recorded beside the journal (journal.Failure) by the
worker that saw it, and ends the workers: the session marks it failed and starts them again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist

from dpwise.errors import DpwiseError
from dpwise.infra.units import mib
from dpwise.measure.agreement import gap
from dpwise.train.checkpoint import atomic_torch_save
from dpwise.train.config import TrainConfig
from dpwise.tune import journal, results
from dpwise.tune.journal import Candidate, Failure, FailureKind, Journal
from dpwise.tune.space import TuneConfig, combinations, duration, is_lossy

WARM_STEPS = 2  # DDP rebuilds its buckets in step 1; PowerSGD compresses from step 3
MIN_TIMED, MAX_TIMED = 2, 200
ROUNDS_PER_BUDGET = 40  # a training's timed part aims at budget / (6 × this): 0.3–5 s
SLOW_TRAINING_S = 5.0  # trainings at least this long each get a progress line


@dataclass
class Training:
    """One training of one configuration, as every worker saw it."""

    seconds: float  # the timed steps, the slowest process's
    total: float  # the whole training: build, warm-up and timed steps, the slowest process's
    losses: list[float]  # each step's loss, averaged over the processes
    peak_memory: int | None = None  # the busiest device's peak (first round only)
    state: dict[str, torch.Tensor] | None = None  # rank 0's final state (first round only)


class Trainer(Protocol):
    """Trains one configuration in every worker (worker.Trainer)."""

    def train(self, tc: TrainConfig, warm: int, timed: int, first: bool) -> Training: ...


def _guess(c: Candidate) -> float:
    """How long its next training will take: the longest of its last two, and 10 % more."""
    return 1.1 * max(c.totals[-2:], default=0.0)


def _reserve(budget: float) -> float:
    """What the end takes after the last round: the workers' exit, results and report."""
    return max(5.0, 0.02 * budget)


def _median(c: Candidate) -> float:
    """The median speed-up so far (infinite before its first round: it goes first)."""
    found = results.comparison(c)
    return float("inf") if found is None else found.ratio


class CandidateFailed(RuntimeError):
    """A configuration failed while it trained: the search records it and goes on."""


def timed_steps(step_seconds: float, budget: float) -> int:
    """Timed steps per training: about budget / 240 seconds of them, 2 to 200."""
    target = min(5.0, max(0.3, budget / (6 * ROUNDS_PER_BUDGET)))
    return int(min(MAX_TIMED, max(MIN_TIMED, math.ceil(target / max(step_seconds, 1e-6)))))


class Search:
    def __init__(
        self,
        cfg: TuneConfig,
        j: Journal,
        trainer: Trainer,
        is_main: bool,
        started: float,
        say: Callable[[str], None],
    ) -> None:
        self.cfg, self.j, self.trainer, self.is_main = cfg, j, trainer, is_main
        self.started = started  # wall clock (time.time()) when this session's command began
        self.before = j.prior  # earlier sessions' time
        self.deadline = started + cfg.budget - j.prior
        self.say = say if is_main else (lambda line: None)
        self.reference: dict[str, torch.Tensor] | None = None
        self.limit = cfg.memory_limit
        ref = journal.reference_path(cfg.out)
        if is_main and ref.is_file():
            self.reference = torch.load(ref, map_location="cpu", weights_only=True)

    # -- the whole search ----------------------------------------------------------------------
    def run(self) -> Journal:
        if self.j.steps is None:
            self._calibrate()
        while True:
            active = [c for c in self.j.candidates if c.state == "active"]
            if not active and not self.j.staged:
                self._second_stage()
                continue
            if not active:
                self.j.stopped = "finished"
                break
            active = self._fitting(active)
            if not active:
                break
            self._round(active)
        self._save()
        return self.j

    def _fitting(self, active: list[Candidate]) -> list[Candidate]:
        """The candidates the next round measures: all, if the round ends before the budget
        (each configuration's last training as its guess); else the most promising that fit
        (the highest median speed-up so far), the others no longer measured; none: stop.
        Rank 0 decides (the workers' clocks differ a little) and sends its journal."""
        if self.is_main:
            guess = _guess(self.j.default)
            left = self.deadline - time.time() - guess - _reserve(self.cfg.budget)
            kept: list[Candidate] = []
            for c in sorted(active, key=lambda c: -_median(c)):
                need = _guess(c) if c.totals else guess
                if need > left:
                    break
                kept.append(c)
                left -= need
            if not kept:
                self.j.stopped = "budget"
            for c in active if kept else []:
                if c not in kept:
                    c.state = "pruned"
                    c.reason = f"the budget left room for the {len(kept)} most promising only" + (
                        f" (its median so far {_median(c):.2f}×)" if c.pairs else ""
                    )
        self._share()
        if self.j.stopped == "budget":
            return []
        return [c for c in self.j.candidates if c.state == "active"]

    def _calibrate(self) -> None:
        """One training of the default sets the timed steps; a budget that cannot hold the
        fewest rounds of the default and one candidate is refused."""
        self.say("calibrating: one training of the default")
        t = self._train(self.j.default, WARM_STEPS, 1, first=False)
        self.j.training += t.total
        step = t.seconds
        steps = timed_steps(step, self.cfg.budget)
        self.j.steps = {"warm": WARM_STEPS, "timed": steps}
        per_training = t.total - step + steps * step
        need = results.MIN_ROUNDS * 2 * per_training
        left = self.deadline - time.time()
        if need > left:
            raise DpwiseError(
                f"--budget {duration(self.cfg.budget)} is too small for one search: a "
                f"training of the default takes {per_training:.1f} s here ({WARM_STEPS} warm-up "
                f"+ {steps} timed steps), and one candidate needs {results.MIN_ROUNDS} rounds "
                f"beside the default, about {duration(need)}, with "
                f"{duration(max(0.0, left))} left; give --budget "
                f"{duration(60 * math.ceil((need + time.time() - self.started) / 60))} or "
                "more (each further candidate adds its own trainings)"
            )
        self.say(
            f"the default: {step:.3g} s per step; each training: {WARM_STEPS} warm-up + "
            f"{steps} timed steps; {len(self.measured())} configuration(s) to measure"
        )
        self._save()

    def measured(self) -> list[Candidate]:
        return [c for c in self.j.candidates if c.state == "active"]

    def _second_stage(self) -> None:
        self.j.staged = True
        done = [c for c in self.j.candidates if c.stage == 1 and len(c.config) == 1]
        winners = [c for c in done if results.eligible(c, self.cfg.allow_lossy, self.limit)]
        known = {c.name for c in self.j.candidates}
        for config in combinations(winners, self.cfg.allow_lossy, self.j.facts["backend"]):
            c = Candidate(config, is_lossy(config), stage=2)
            if c.name not in known:
                self.j.candidates.append(c)
                self.say(f"second stage: {c.name} (the winners together)")

    # -- one round -----------------------------------------------------------------------------
    def _round(self, active: list[Candidate]) -> None:
        assert self.j.steps is not None  # calibrated first
        steps = self.j.steps
        order = [self.j.default, *active]
        shift = self.j.rounds % len(order)
        order = order[shift:] + order[:shift]  # a change in the machine's speed hits each alike
        times: dict[str, float] = {}
        for c in order:
            first = not c.totals
            t = self._train(c, steps["warm"], steps["timed"], first)
            times[c.name] = t.seconds
            if t.total >= SLOW_TRAINING_S:  # a line per training where rounds take minutes
                self.say(
                    f"round {self.j.rounds + 1}: {c.name} {t.seconds / steps['timed']:.3g} s per "
                    f"step · {duration(self.deadline - time.time())} of the budget left"
                )
            c.totals.append(t.total)
            self.j.training += t.total
            if first:
                self._first(c, t)
        d = times[self.j.default.name]
        self.j.default.pairs.append([d, d])
        for c in active:
            if c.state == "active" or (c.state == "rejected" and not c.pairs):
                c.pairs.append([d, times[c.name]])  # a rejected one keeps its first figures
                results.after_round(c)
        self.j.rounds += 1
        self._share()
        self.say(progress(self.j, self.deadline - time.time(), self.cfg.allow_lossy))

    def _train(self, c: Candidate, warm: int, timed: int, first: bool) -> Training:
        self.j.in_flight = c.name
        self._save()
        try:
            t = self.trainer.train(self.cfg.train_config(c.config), warm, timed, first)
        except (DpwiseError, torch.OutOfMemoryError) as exc:
            if c is self.j.default:
                raise
            self._failed(c, exc)
            raise CandidateFailed(str(exc).splitlines()[0]) from exc
        finally:
            self.j.in_flight = None
        bad = next((i for i, v in enumerate(t.losses) if not math.isfinite(v)), None)
        if bad is not None and c is self.j.default:
            raise DpwiseError(
                f"the default configuration's loss became {t.losses[bad]} at step {bad + 1}: "
                "tune a workload that trains (lower --lr, check the data), then tune it"
            )
        if bad is not None and c.state == "active":
            c.state = "rejected"
            c.reason = (
                f"its loss became {t.losses[bad]} at step {bad + 1} (the default's stayed finite)"
            )
        return t

    def _failed(self, c: Candidate, exc: BaseException) -> None:
        """This worker's record of the candidate's failure, for the session (rank 0's journal
        may not know it: the failure may be this worker's alone)."""
        oom = isinstance(exc, torch.OutOfMemoryError)
        rank = dist.get_rank() if dist.is_initialized() else 0
        message = next(iter(str(exc).splitlines()), "")
        kind: FailureKind = "out_of_memory" if oom else "error"
        journal.record_failure(self.cfg.out, Failure(kind, rank, c.name, message))

    def _first(self, c: Candidate, t: Training) -> None:
        """The first round of a configuration: its memory, and its state against the default's."""
        c.peak_memory = t.peak_memory
        if c is self.j.default:
            c.drift = {"losses": t.losses}
            if self.is_main and t.state is not None:
                self.reference = t.state
                atomic_torch_save(t.state, journal.reference_path(self.cfg.out))
            return
        if self.limit is not None and t.peak_memory is not None and t.peak_memory > self.limit:
            c.state = "rejected"
            c.reason = (
                f"its peak memory per device, {mib(t.peak_memory)}, is above --device-memory "
                f"{self.cfg.device_memory:g} GiB"
            )
        if self.is_main and self.reference is not None and t.state is not None:
            self._held_to_default(c, t)

    def _held_to_default(self, c: Candidate, t: Training) -> None:
        assert self.reference is not None and t.state is not None
        found = gap(self.reference, t.state, list(self.reference), self.cfg.tolerance)
        losses = (self.j.default.drift or {}).get("losses") or []
        distance = max((abs(a - b) for a, b in zip(losses, t.losses, strict=False)), default=0.0)
        steps = len(t.losses)
        c.equivalent = found.within
        c.drift = {
            "max_param_diff": found.max,
            "largest_in": found.name,
            "beyond_tolerance": list(found.beyond)[:5],
            "loss_distance": distance,
            "steps": steps,
            "losses": t.losses,
        }
        if not found.within and not c.lossy and c.state == "active":
            c.state = "rejected"
            c.reason = (
                f"not the default's model: after {steps} steps its parameters are "
                f"{found.max:.2g} from the default's (largest in {found.name}), beyond "
                f"--tolerance {self.cfg.tolerance:g}"
                + (
                    " (its micro-batches change what BatchNorm or a per-batch statistic sees)"
                    if "accum_steps" in c.config
                    else ""
                )
            )

    # -- the journal ---------------------------------------------------------------------------
    def _save(self) -> None:
        self.j.elapsed = self.before + (time.time() - self.started)
        if self.is_main:
            journal.write(self.cfg.out, self.j)

    def _share(self) -> None:
        """Rank 0's journal to every worker (the decisions are rank 0's)."""
        self._save()
        if dist.is_initialized() and dist.get_world_size() > 1:
            box: list[Journal | None] = [self.j if self.is_main else None]
            dist.broadcast_object_list(box, src=0)
            if not self.is_main and box[0] is not None:
                self.j = box[0]


def progress(j: Journal, left: float, allow_lossy: bool) -> str:
    """The line after each round: what is measured still, what is decided, the best so far."""
    active = sum(c.state == "active" for c in j.candidates)
    decided = sum(c.state != "active" for c in j.candidates)
    return (
        f"round {j.rounds}: {active} configuration(s) still measured, {decided} decided · "
        f"{_best(j, allow_lossy)} · {duration(left)} of the budget left"
    )


def _best(j: Journal, allow_lossy: bool) -> str:
    ranked = results.ranked(j.candidates, allow_lossy, None)
    if not ranked:
        return "no configuration faster than the default yet"
    v = results.verdict(ranked[0])
    return f"best so far {ranked[0].name}: {v.ratio:.2f}× ({v.low:.2f}–{v.high:.2f}×)"

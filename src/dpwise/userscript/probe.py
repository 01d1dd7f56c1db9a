"""A profiler window over a user's script's optimizer steps, inside each rank, the script unedited
(DPWISE_SCRIPT_PROFILE="W,P": W warm-up steps, then P profiled steps).

The optimizer's post-hooks are the only step boundaries there are: the profiler starts when step
W ends and stops when step W+P ends, and each profiled step is a `profile.STEP_MARK` window
opened at one step's end and closed at the next's (its data loading, forward, backward and
optimizer step). Outside the window the probe costs one counter per step; its start and stop
happen before the meter closes the step (`harness`), so they fall in step W (a warm-up step) and
step W+P (a profiled one); the trace is read and exported only when the rank writes what it
measured. What the window says, per step (as compare reads its own probe,
`compare.measurement._figures`): the collectives (count and bytes by kind; DDP's buckets), on
the CPU the peak of live tensor bytes, on CUDA the host's waits on the device.

The CPU's live peak: the profiler's memory recording sees only what is allocated while it
records, so the tensors the optimizer holds (parameters, gradients kept by `zero_grad(
set_to_none=False)`, optimizer state) that were live from the window's start to its end are
added to the window's own peak; tensors allocated before the window that Python does not reach
(DDP's buckets) are not counted. compare's exposed communication (steps with and without
gradient sync, paired) needs the loop in hand; a script's loop is not, so it is not measured.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from dpwise.errors import DpwiseError
from dpwise.measure import buckets, profile

VARIABLE = "DPWISE_SCRIPT_PROFILE"
TRACE = "trace-rank"  # + the rank + ".json": the window's Chrome trace, beside DPWISE_SCRIPT_OUT


def parse(value: str) -> tuple[int, int]:
    """ "W,P" → (W, P): W ≥ 1 warm-up steps (the window opens when a step ends), P ≥ 1
    profiled steps."""
    try:
        warm, steps = (int(part) for part in value.split(","))
    except ValueError:
        raise DpwiseError(
            f'{VARIABLE}={value!r} is not "W,P"; give the warm-up and profiled steps, e.g. "2,3"'
        ) from None
    if warm < 1 or steps < 1:
        raise DpwiseError(
            f"{VARIABLE}={value!r}: give W ≥ 1 warm-up steps (the window opens when a step "
            "ends) and P ≥ 1 profiled ones"
        )
    return warm, steps


class Probe:
    """Counts optimizer steps; ``step`` (from the optimizer's post-hook, before the meter closes
    the step) opens and closes the window; ``result`` reads it."""

    def __init__(self, warm: int, steps: int, out: Path, rank: int | Callable[[], int]) -> None:
        self.warm, self.steps = warm, steps
        self._rank = rank  # a process a script spawned knows its rank once its group is up
        self._folder = out.parent
        self.taken = 0
        self._session: AbstractContextManager[Any] | None = None
        self._prof: Any = None
        self._mark: AbstractContextManager[Any] | None = None
        self._held: list[tuple[weakref.ref[torch.Tensor], int]] = []
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._element_size = 4
        self._gradient_bytes = 0
        self._device = "cpu"
        self._stopped = False
        self._kept = 0

    @property
    def rank(self) -> int:
        return self._rank() if callable(self._rank) else self._rank

    @property
    def trace(self) -> Path:
        """This rank's trace file (each rank its own: two that shared one would race)."""
        return self._folder / f"{TRACE}{self.rank}.json"

    @classmethod
    def from_env(cls, out: str, rank: Callable[[], int]) -> Probe | None:
        """The window DPWISE_SCRIPT_PROFILE asks for, its rank read when the trace is written
        (the harness's: a spawned process has no RANK in its environment)."""
        value = os.environ.get(VARIABLE)
        if not value:
            return None
        warm, steps = parse(value)
        return cls(warm, steps, Path(out), rank)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        self.taken += 1
        if self.taken > self.warm + self.steps:
            return
        if self.taken <= self.warm:
            self._optimizers.add(optimizer)  # the optimizers whose tensors the window holds
            if self.taken == self.warm:
                self._start()
            return
        assert self._mark is not None
        self._mark.__exit__(None, None, None)
        if self.taken < self.warm + self.steps:
            self._mark = profile.mark_step()
            self._mark.__enter__()
            return
        self._stop()

    def _start(self) -> None:
        params = [p for o in self._optimizers for g in o.param_groups for p in g["params"]]
        self._device = params[0].device.type if params else "cpu"
        self._element_size = params[0].element_size() if params else 4
        self._gradient_bytes = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
        if self._device == "cpu":
            self._held = _held(self._optimizers)
        launched = torch.distributed.is_available() and torch.distributed.is_initialized()
        self._session = profile.session(
            self._device, with_memory=self._device == "cpu", with_shapes=launched
        )
        self._prof = self._session.__enter__()
        self._mark = profile.mark_step()
        self._mark.__enter__()

    def _stop(self) -> None:
        assert self._session is not None
        self._session.__exit__(None, None, None)
        self._stopped = True
        self._kept = sum(size for ref, size in self._held if ref() is not None)
        self._held = []

    def result(self) -> dict[str, Any]:
        """What the window measured (read once, when the rank writes its measure file)."""
        if not self._stopped:
            if self._session is not None:
                self._session.__exit__(None, None, None)
            return {
                "warm_steps": self.warm,
                "profiled_steps": self.steps,
                "error": f"the run ended after {self.taken} steps, before the profiled window "
                f"(steps {self.warm + 1} to {self.warm + self.steps}) closed",
            }
        events = list(self._prof.events())
        windows = profile.step_windows(events, skip=0)
        out: dict[str, Any] = {
            "warm_steps": self.warm,
            "profiled_steps": len(windows),
            "communication": {
                **profile.collectives(events, windows, self._element_size),
                "gradient_bytes": self._gradient_bytes,
                "buckets": buckets.step_buckets(events, windows, self._element_size),
            },
        }
        if self._device == "cpu":
            rank, trace = self.rank, self.trace
            profile.export(self._prof, trace)
            window_peak = profile.peak_live_cpu_bytes(trace) or 0
            out["live_tensor_bytes"] = self._kept + window_peak
            out["live_tensor_bytes_held"] = self._kept
            out["trace"] = str(trace) if rank == 0 else None
            if rank != 0:
                trace.unlink()
        else:
            out["sync_points_per_step"] = profile.sync_points(events, windows)
        self._prof = None
        return out


def _held(optimizers: Any) -> list[tuple[weakref.ref[torch.Tensor], int]]:
    """The optimizers' CPU tensors (parameters, gradients, state), one per storage: each with a
    weak reference (alive at the window's end: live all through it) and its storage's bytes."""
    found: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
    for optimizer in optimizers:
        tensors: list[Any] = []
        for group in optimizer.param_groups:
            for p in group["params"]:
                tensors += [p, p.grad]
        for state in optimizer.state.values():
            tensors += list(state.values())
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
                continue
            if t.layout != torch.strided:  # a sparse gradient: no one storage to count
                continue
            storage = t.untyped_storage()
            found.setdefault(storage.data_ptr(), (weakref.ref(t), storage.nbytes()))
    return list(found.values())

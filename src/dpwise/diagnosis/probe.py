"""Run the real model on a few rows of the real data, on the CPU, and report what it found.

Every pass starts from the same weights and input under another seed, runs the forward with every
module hooked and then the backward: the hooks name the random modules (stochastic.py), the missing
gradients name the unused parameters (unused.py). Further passes run on other rows (one seed each),
so that a parameter used on some batches only is told from one never used. The buffers the first
forward changed are named, each tested for whether the loss reads it (buffers.py). Global random
generators are restored after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from dpwise.diagnosis import buffers
from dpwise.diagnosis.buffers import MutatedBuffer
from dpwise.diagnosis.calls import Call, CallRecorder, release_weights
from dpwise.diagnosis.layers import Layer, layers_of
from dpwise.diagnosis.rng import Saved, seed_all
from dpwise.diagnosis.stochastic import stochastic_modules
from dpwise.diagnosis.unused import Unused, classify, without_grad

ROWS = 2  # rows of the real data per pass (BatchNorm needs two)
SEEDS = tuple(range(6))  # one pass per seed; their first uniform draws span 0.004–0.83
BATCHES = 6  # further passes, each on other rows (where the data has them)
MAX_PARAMETERS = 150_000_000  # above this the probe is skipped (its cost grows with the model)
BUDGET_S = 10.0  # after this, no further pass starts once two have run


@dataclass(frozen=True)
class ModelProbe:
    stochastic: list[Layer] = field(default_factory=list)
    unused: Unused = field(default_factory=Unused)
    buffers: list[MutatedBuffer] = field(default_factory=list)  # changed by the forward
    rows: int = 0
    seconds: float = 0.0
    skipped: str | None = None  # why the probe did not run; None when it ran

    def to_dict(self) -> dict[str, Any]:
        return {
            "ran": self.skipped is None,
            "skipped": self.skipped,
            "rows": self.rows,
            "passes": self.unused.passes,
            "seconds": round(self.seconds, 3),
            "stochastic": [layer.to_dict() for layer in self.stochastic],
            "unused_parameters": self.unused.to_dict(),
            "mutated_buffers": [b.to_dict() for b in self.buffers],
        }


def loss_of(workload: Any, model: nn.Module, x: Any, y: Any) -> torch.Tensor:
    """The training loss of one batch: the only place the probe calls the model."""
    return workload.loss(model, x, y)


@contextmanager
def _one_thread() -> Iterator[None]:
    """Two rows gain little from threads, and on a busy machine threads stall."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        release_weights()


def _too_large(model: nn.Module) -> str | None:
    count = sum(p.numel() for p in model.parameters())
    return (
        f"the model has {count:,} parameters, over {MAX_PARAMETERS:,}"
        if count > MAX_PARAMETERS
        else None
    )


@dataclass
class _Passes:
    calls: list[list[Call]] = field(default_factory=list)  # per seed pass
    unused: list[set[str]] = field(default_factory=list)  # per seed pass, on the first rows
    by_batch: list[set[str]] = field(default_factory=list)  # per pass on other rows
    buffers: list[MutatedBuffer] = field(default_factory=list)


def _passes(workload: Any, model: nn.Module, data: Any, rows: int) -> _Passes:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    kept = buffers.snapshot(model)  # non-persistent buffers too

    def reset() -> None:
        model.load_state_dict(state)
        for name, value in kept.items():
            model.get_buffer(name).copy_(value)
        model.zero_grad(set_to_none=True)

    x, y = data.get(torch.arange(min(rows, len(data))))
    out = _Passes()
    deadline = time.perf_counter() + BUDGET_S
    for seed in SEEDS:
        if len(out.calls) >= 2 and time.perf_counter() > deadline:
            break
        reset()
        seed_all(seed)
        with CallRecorder(model) as recorder:
            loss = loss_of(workload, model, x, y)
        if seed == SEEDS[0]:
            changed = buffers.changed(model, kept)
        loss.backward()
        out.calls.append(recorder.calls)
        out.unused.append(without_grad(model))

    def first_loss() -> torch.Tensor:
        seed_all(SEEDS[0])
        return loss_of(workload, model, x, y)

    out.buffers = buffers.classify(model, changed, reset, first_loss) if changed else []
    for batch in range(1, BATCHES + 1):
        picked = torch.arange(batch * rows, (batch + 1) * rows)
        if picked[-1] >= len(data) or time.perf_counter() > deadline:
            break
        reset()
        seed_all(SEEDS[0])
        bx, by = data.get(picked)
        loss_of(workload, model, bx, by).backward()
        out.by_batch.append(without_grad(model))
    reset()
    return out


def probe_workload(workload: Any, seed: int, rows: int = ROWS) -> ModelProbe:
    """Probe the workload's model (built from ``seed``) on its first ``rows`` rows."""
    start = time.perf_counter()
    with Saved(), _one_thread():
        torch.manual_seed(seed)
        model = workload.build_model().train()  # the runs build it on the CPU too
        too_large = _too_large(model)
        if too_large:
            return ModelProbe(skipped=too_large)
        data = workload.load_data(seed)
        try:
            found = _passes(workload, model, data, rows)
        except Exception as exc:  # e.g. a model that needs a GPU: say so, find layers by class
            reason = f"the model did not run on the CPU ({type(exc).__name__}: {exc})"
            return ModelProbe(skipped=reason.splitlines()[0][:300])
    return ModelProbe(
        stochastic=layers_of(model, stochastic_modules(found.calls)),
        unused=classify(model, found.unused, found.by_batch),
        buffers=found.buffers,
        rows=min(rows, len(data)),
        seconds=time.perf_counter() - start,
    )

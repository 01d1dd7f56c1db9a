"""Run the real model on a few rows of the real data, on the CPU, and report what it found.

Every pass starts from the same weights and input under another seed, runs the forward with every
module hooked and then the backward: the hooks name the random modules (stochastic.py), the missing
gradients name the unused parameters (unused.py). Global random generators are restored after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from dpwise.diagnosis.calls import Call, CallRecorder, release_weights
from dpwise.diagnosis.layers import Layer, layers_of
from dpwise.diagnosis.rng import Saved, seed_all
from dpwise.diagnosis.stochastic import stochastic_modules
from dpwise.diagnosis.unused import Unused, classify, without_grad

ROWS = 2  # rows of the real data per pass (BatchNorm needs two)
SEEDS = tuple(range(6))  # one pass per seed; their first uniform draws span 0.004–0.83
MAX_PARAMETERS = 150_000_000  # above this the probe is skipped (its cost grows with the model)
BUDGET_S = 10.0  # after this, no further pass starts once two have run


@dataclass(frozen=True)
class ModelProbe:
    stochastic: list[Layer] = field(default_factory=list)
    unused: Unused = field(default_factory=Unused)
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


def _passes(workload: Any, model: nn.Module, x: Any, y: Any) -> tuple[list[list[Call]], list]:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    calls, unused = [], []
    deadline = time.perf_counter() + BUDGET_S
    for seed in SEEDS:
        if len(calls) >= 2 and time.perf_counter() > deadline:
            break
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        seed_all(seed)
        with CallRecorder(model) as recorder:
            loss = loss_of(workload, model, x, y)
        loss.backward()
        calls.append(recorder.calls)
        unused.append(without_grad(model))
    return calls, unused


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
        picked = torch.arange(min(rows, len(data)))
        x, y = data.get(picked)
        try:
            calls, unused = _passes(workload, model, x, y)
        except Exception as exc:  # e.g. a model that needs a GPU: say so, find layers by class
            reason = f"the model did not run on the CPU ({type(exc).__name__}: {exc})"
            return ModelProbe(skipped=reason.splitlines()[0][:300])
    return ModelProbe(
        stochastic=layers_of(model, stochastic_modules(calls)),
        unused=classify(model, unused),
        rows=len(picked),
        seconds=time.perf_counter() - start,
    )

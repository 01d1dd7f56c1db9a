"""What one training step holds beyond the model states, and how it was found.

Three paths, tried in this order, the answer naming the one it took and why:

- ``measured-cpu``: a model whose parameters fit ``REAL_RUN_LIMIT`` runs two real training steps on
  the CPU at two small batches under torch.profiler (the measurement `dpwise compare` makes); the
  batch-dependent part is scaled linearly in the batch.
- ``meta-trace``: a larger model is traced on the meta device, where the tensors autograd saves for
  backward are summed per sample without allocating memory.
- ``parameter-count``: when the meta trace cannot run (a forward that reads tensor values, such as
  ``.item()`` or data-dependent branches) and the model is too large to run for real, only the model
  states are counted and the answer says that activations are missing.

A model whose meta trace fails but that fits in this machine's memory is measured for real instead.
Every probe uses at least two rows: BatchNorm in training mode refuses one value per channel.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.infra.units import size
from dpwise.workload import batches
from dpwise.workload.data import BatchSource
from dpwise.workload.spec import Workload

# parameter bytes up to which the batch-dependent part is measured for real
REAL_RUN_LIMIT = 1 << 30
PROBE_BATCHES = (4, 8)  # rows of the real CPU steps
TRACE_BATCHES = (2, 4)  # rows of the meta trace; two at least, for BatchNorm in training mode
IO_ROWS = 2  # rows of the forward that sizes inputs and outputs
GROWTH_MAX_ROWS = 256  # the largest batch probed when the small ones sit on a flat peak


def step_loss(workload: Workload, model: nn.Module, x: Any, y: Any) -> torch.Tensor:
    """Forward and loss of one training step: the one place the estimate trains the model."""
    return workload.loss(model, x, y)


def step_forward(workload: Workload, model: nn.Module, x: Any) -> Any:
    """Forward only: the one place the estimate runs the model without a loss."""
    return workload.forward(model, x)


def tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a tensor, tuple, list, dict or transformers ModelOutput (a Mapping)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in tensors(v)]
    if isinstance(obj, (tuple, list)):
        return [t for v in obj for t in tensors(v)]
    return []


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    return obj


def per_row_bytes(obj: Any, rows: int) -> int:
    """Bytes per sample of the tensors that have one row per sample (scalars such as a loss not)."""
    batched = [t for t in tensors(obj) if t.dim() > 0 and t.shape[0] == rows]
    return sum(t.numel() * t.element_size() for t in batched) // max(rows, 1)


def sample(data: BatchSource, rows: int) -> tuple[Any, Any]:
    return data.get(torch.arange(min(rows, len(data))))


def io_bytes(workload: Workload, model: nn.Module, x: Any) -> tuple[int, int]:
    """Input and output bytes per sample, from one forward on the device ``x`` lives on."""
    with torch.no_grad():
        out = step_forward(workload, model, x)
    rows = batches.rows(x)
    return per_row_bytes(x, rows), per_row_bytes(out, rows)


def measured_peak(workload: Workload, data: BatchSource, rows: int, cfg: dict[str, Any]) -> int:
    """Peak live CPU tensor bytes of two training steps, measured as `dpwise compare` does."""
    from dpwise.infra import scratch
    from dpwise.measure import profile
    from dpwise.train.engine import make_optimizer
    from dpwise.train.precision import Precision

    index = torch.arange(min(rows, len(data)))
    with scratch.folder("trace") as tmp:
        trace = tmp / "trace.json"
        with profile.session("cpu", with_memory=True) as prof:
            torch.manual_seed(cfg["seed"])
            model = workload.build_model()
            opt = make_optimizer(cfg["optimizer"], model.parameters(), 1e-3, cfg["momentum"], 0.0)
            amp = Precision(cfg["precision"], "cpu")
            for _ in range(2):  # the second step already holds the optimizer state
                x, y = data.get(index)
                with amp.autocast():
                    loss = step_loss(workload, model, x, y)
                amp.backward(loss)
                amp.step(opt)
                opt.zero_grad(set_to_none=True)
        profile.export(prof, trace)
        return profile.peak_live_cpu_bytes(trace) or 0


def saved_bytes(workload: Workload, model: nn.Module, x: Any, y: Any) -> int:
    """Bytes autograd keeps for backward in one forward (parameters excluded), on any device."""
    params = {id(p) for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(base) not in params:
            seen[id(base)] = base.numel() * base.element_size()
        return t

    # On the meta device autocast does not apply: activations count at full precision there,
    # an upper bound for bf16/fp16 runs.
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step_loss(workload, model, x, y)
    return sum(seen.values())


@dataclass(frozen=True)
class Footprint:
    per_sample_bytes: float
    fixed_bytes: float
    input_bytes_per_sample: int
    output_bytes_per_sample: int
    method: str  # "measured-cpu", "meta-trace" or "parameter-count"
    reason: str  # which path was taken and why
    floor_bytes: float = 0.0  # the step never adds less than this beyond the model states


def _failure(exc: Exception) -> str:
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[0][:160]}"


def _meta(x: Any) -> Any:
    return map_tensors(x, lambda t: t.to("meta"))


def _try(fn: Callable[[], Any]) -> tuple[Any, Exception | None]:
    """Run a meta-device probe; a user mistake (DpwiseError) still stops, anything else is kept."""
    try:
        return fn(), None
    except DpwiseError:
        raise
    except Exception as exc:  # the model's code can fail on meta tensors in any way
        return None, exc


def available_memory() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _saved_per_sample(workload: Workload, data: BatchSource, cfg: dict[str, Any]) -> float:
    """What autograd saves for backward per sample, on a real CPU model (no profiler)."""
    b1, b2 = PROBE_BATCHES
    torch.manual_seed(cfg["seed"])
    model = workload.build_model()
    s1, s2 = (saved_bytes(workload, model, *sample(data, b)) for b in (b1, b2))
    return max(0.0, (s2 - s1) / (b2 - b1))


def _line(workload, data, cfg, rows: tuple[int, int]) -> tuple[float, float]:
    """Slope and value at rows[0] of the measured peak between two batches."""
    p1, p2 = (measured_peak(workload, data, b, cfg) for b in rows)
    return max(0.0, (p2 - p1) / (rows[1] - rows[0])), float(p1)


def _measured(workload, data, cfg, states: int, io: tuple[int, int], why: str) -> Footprint:
    """The peak is the larger of two regimes: activations live (grows with the batch) and, at
    small batches, the end of backward where the gradients outlive the freed activations (flat).
    When the two small probes sit on the flat part, two larger ones measure the growth."""
    rows = PROBE_BATCHES
    per_sample, p1 = _line(workload, data, cfg, rows)
    floor = max(0.0, p1 - states)
    how = f"two training steps at batches {rows[0]} and {rows[1]}"
    saved = _saved_per_sample(workload, data, cfg)
    if per_sample < 0.5 * saved:
        top = int(min(GROWTH_MAX_ROWS, len(data), max(4 * rows[1], states // max(saved, 1))))
        rows = (top // 2, top)
        per_sample, p1 = _line(workload, data, cfg, rows)
        how += (
            f" (their peak did not grow with the batch: it fell where the gradients outlive "
            f"the activations) and two at batches {rows[0]} and {rows[1]}"
        )
    fixed = p1 - states - per_sample * rows[0]
    reason = (
        f"{why}: {how} ran on the CPU, measured under torch.profiler as dpwise compare "
        "measures, and scaled linearly in the batch"
    )
    return Footprint(per_sample, fixed, *io, "measured-cpu", reason, floor)


def _traced(workload, meta_model, data, io: tuple[int, int], param_bytes: int) -> Footprint:
    """Raises whatever the model's forward raises on meta tensors."""
    b1, b2 = TRACE_BATCHES
    s1, s2 = (saved_bytes(workload, meta_model, *map(_meta, sample(data, b))) for b in (b1, b2))
    reason = (
        f"the parameters take {size(param_bytes)} (over {size(REAL_RUN_LIMIT)}, too many to run "
        f"here): the tensors autograd saves for backward were traced on the meta device at "
        f"batches {b1} and {b2}, without allocating memory"
    )
    return Footprint(float(s2 - s1) / (b2 - b1), 0.0, *io, "meta-trace", reason)


def _counted(x: Any, io: tuple[int, int] | None, failed: str, states: int) -> Footprint:
    reason = (
        f"the meta-device trace failed ({failed}) and the model states "
        f"({size(states)}) do not fit this machine's memory to run it for real: only parameters, "
        "gradients and optimizer state are counted; activations are NOT included"
    )
    inp, out = io if io is not None else (per_row_bytes(x, batches.rows(x)), 0)
    return Footprint(0.0, 0.0, inp, out, "parameter-count", reason)


def footprint(
    workload: Workload,
    meta_model: nn.Module,
    data: BatchSource,
    cfg: dict[str, Any],
    states: int,
    param_bytes: int,
) -> Footprint:
    """``states``: bytes of parameters, gradients, optimizer state and AMP casts of one replica."""
    x, _ = sample(data, IO_ROWS)
    io, error = _try(lambda: io_bytes(workload, meta_model, _meta(x)))
    large = param_bytes > REAL_RUN_LIMIT
    if large and error is None:
        traced, error = _try(lambda: _traced(workload, meta_model, data, io, param_bytes))
        if traced is not None:
            return traced
    # from here, a large model's trace failed (or its forward did), as a failed forward did
    failed = _failure(error) if error is not None else ""
    if large and not 2 * states < available_memory():
        return _counted(x, io, failed, states)
    if large:
        why = (
            f"the meta-device trace failed ({failed}) and the model states "
            f"({size(states)}) fit this machine's memory"
        )
    else:
        why = f"the parameters take {size(param_bytes)} (up to {size(REAL_RUN_LIMIT)})"
    if io is None:
        why += (
            f"; the meta-device forward failed ({failed}), so a real CPU forward of "
            f"{IO_ROWS} samples sized the inputs and outputs"
        )
        torch.manual_seed(cfg["seed"])
        io = io_bytes(workload, workload.build_model(), x)
    return _measured(workload, data, cfg, states, io, why)

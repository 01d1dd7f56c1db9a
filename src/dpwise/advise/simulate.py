"""The busiest rank's memory at the world size asked, measured by running PyTorch's own sharding
code without the devices: FSDP2's `fully_shard` on a mesh of a `fake` process group (every
collective a no-op) of N ranks, the model and its batch as fake tensors (`FakeTensorMode`: shapes
and sizes, no data), and `FSDPMemTracker` attributing rank 0's live tensors to parameters,
gradients, optimizer state, activations, temporaries and communication buffers. One step is a
warm-up; the peak of the second is reported (every rank is rank 0's twin under a fake group).

Each simulation runs in a process of its own, with a time limit and a memory limit: a model
that cannot be traced with fake tensors (data-dependent shapes, custom kernels), a simulation
that runs out of time or memory, or a torch without the private APIs (detected, never assumed)
falls back to the formula, and the answer says why.

The optimizer runs without `foreach` (nor fused): under fake tensors their grouped kernels are
counted at full, unsharded shapes.
"""

from __future__ import annotations

import multiprocessing
import queue
import resource
from dataclasses import dataclass
from typing import Any

# torch's private APIs the simulation uses: their module and name
PRIVATE = (
    ("torch.testing._internal.distributed.fake_pg", "FakeStore"),
    ("torch.distributed._tools.fsdp2_mem_tracker", "FSDPMemTracker"),
    ("torch._subclasses.fake_tensor", "FakeTensorMode"),
)
MEMORY_LIMIT = 4 * 2**30  # bytes of address space a simulation may take (fake tensors take none)
# Where the formula puts the busiest rank within this, the simulation runs real tensors: exact.
# Above it, fake tensors. On the guide's MLP (1000→512→10, AdamW), fake tensors counted the
# optimizer's state at 13× what real ones hold (6.6 MiB against 0.50 MiB at 8 ranks); on a
# transformer they matched real tensors byte for byte (tests/test_advise_simulate.py).
REAL_LIMIT = 1 * 2**30
SIMULATED = ("fsdp",)  # the strategies simulated so far


@dataclass(frozen=True)
class Simulated:
    """One strategy simulated at a world size: rank 0's peak by category (bytes), or why not."""

    strategy: str
    world_size: int
    peak_bytes: int | None
    by_category: dict[str, int]
    seconds: float
    why_not: str | None = None
    tensors: str = "fake"  # "real": real tensors, no-op collectives (exact); "fake": no data


def missing() -> str | None:
    """The first private API this torch lacks, named; None when it has all."""
    import importlib

    for module, name in PRIVATE:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            found = None
        if found is None:
            return f"this torch has no {module}.{name}"
    return None


def _body(spec: dict[str, Any], world: int, rows: int, fake: bool, out: Any) -> None:
    """In the simulation's own process: FSDP2 on a fake mesh of ``world`` ranks, two steps of
    ``rows`` rows each, rank 0's peak by category put on ``out``."""
    import time

    start = time.perf_counter()
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, hard))
    try:
        out.put(("ok", _fsdp_peak(spec, world, rows, fake), time.perf_counter() - start))
    except MemoryError:
        out.put(("error", f"it ran out of its {MEMORY_LIMIT / 2**30:.0f} GiB memory limit", 0.0))
    except Exception as exc:  # any failure of a user's model under fake tensors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        out.put(("error", f"{type(exc).__name__}: {first}"[:300], 0.0))


def _fsdp_peak(spec: dict[str, Any], world: int, rows: int, fake: bool) -> dict[str, int]:
    """Rank 0's peak by category: FSDP2 over the workload's model on a fake mesh of ``world``
    ranks, ``rows`` rows a step; with real tensors (exact) or, ``fake``, fake ones."""
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from dpwise.advise.footprint import map_tensors, sample
    from dpwise.workload.spec import resolve_workload

    workload = resolve_workload(spec["model"], spec["model_args"], spec["data"],
                                spec["data_args"], spec["loss"])  # fmt: skip
    x, y = sample(workload.load_data(0), rows)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    mesh = init_device_mesh("cpu", (world,))  # before fake mode: the mesh is real
    try:
        if not fake:  # real tensors, no-op collectives
            return _steps(workload, workload.build_model(), mesh, spec, x, y)
        with torch.device("meta"):  # no memory; a deepcopy in it makes no fake mode of its own
            model = workload.build_model()
        with FakeTensorMode(allow_non_fake_inputs=True):  # the meta model's tensors made fake
            model.to_empty(device="cpu")  # every parameter and buffer a fake tensor of this mode
            fx, fy = (map_tensors(t, _fake) if t is not None else None for t in (x, y))
            return _steps(workload, model, mesh, spec, fx, fy)
    finally:
        dist.destroy_process_group()


def _steps(workload: Any, model: Any, mesh: Any, spec: dict[str, Any], x: Any, y: Any
           ) -> dict[str, int]:  # fmt: skip
    """FSDP2 over ``model``'s units and root (dpwise's fsdp strategy's units), two steps under
    FSDPMemTracker: the second step's peak by category."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import fully_shard

    from dpwise.advise.footprint import step_loss
    from dpwise.strategies.fsdp import shard_units

    for _, unit in shard_units(model):
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = _optimizer(spec, model)
    tracker = FSDPMemTracker(model, opt)
    tracker.track_inputs((x,))
    with tracker:
        for step in range(2):
            step_loss(workload, model, x, y).backward()
            opt.step()
            opt.zero_grad()
            if step == 0:
                tracker.reset_mod_stats()
    snapshot = tracker.get_tracker_snapshot("peak")
    device = next(iter(snapshot))
    return {str(getattr(k, "value", k)): int(v) for k, v in snapshot[device].items()}


def _fake(t: Any) -> Any:
    """A tensor of ``t``'s shape and dtype made under the fake mode (zeros: class indices and
    token ids stay in range)."""
    import torch

    return torch.zeros(t.shape, dtype=t.dtype)


def _optimizer(spec: dict[str, Any], model: Any) -> Any:
    import torch

    params = model.parameters()
    if spec["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=spec["momentum"], foreach=False)
    return torch.optim.AdamW(params, lr=1e-3, foreach=False, fused=False)


def simulate(spec: dict[str, Any], strategy: str, world: int, global_batch: int,
             timeout: float, formula_bytes: int | None = None) -> Simulated:  # fmt: skip
    """``strategy`` at ``world`` ranks, in a process of its own within ``timeout`` seconds;
    ``spec``: the workload (model, model_args, data, data_args, loss) and the optimizer. With
    real tensors where the formula puts the busiest rank within REAL_LIMIT (exact), else fake."""
    if strategy not in SIMULATED:
        return Simulated(strategy, world, None, {}, 0.0, f"{strategy} is not simulated yet")
    reason = missing()
    if reason is not None:
        return Simulated(strategy, world, None, {}, 0.0, reason)
    rows = max(1, global_batch // world)
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    fake = formula_bytes is None or formula_bytes > REAL_LIMIT
    proc = context.Process(target=_body, args=(spec, world, rows, fake, out), daemon=True)
    proc.start()
    try:
        status, value, seconds = out.get(timeout=timeout)
    except queue.Empty:
        return Simulated(strategy, world, None, {}, timeout,
                         f"it did not end within its {timeout:g} s")  # fmt: skip
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
    tensors = "fake" if fake else "real"
    if status != "ok":
        return Simulated(strategy, world, None, {}, 0.0, str(value), tensors)
    return Simulated(strategy, world, int(value["Total"]), value, seconds, None, tensors)

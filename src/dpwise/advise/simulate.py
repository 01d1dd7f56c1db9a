"""The busiest rank's memory at the world size asked, measured by running PyTorch's own code
without the devices: DDP (with or without ZeroRedundancyOptimizer) and FSDP2's `fully_shard` on a
`fake` process group of N ranks, every collective a no-op (dpwise.advise.simulate_run runs
it). Here: which cases are simulated, each in a process of its own with a time limit and a
memory limit; a model that cannot be traced with fake tensors (data-dependent shapes, custom
kernels), a simulation that runs out of time or memory, or a torch without the private APIs
(detected, never assumed) falls back to the formula, and the answer says why.
"""

from __future__ import annotations

import multiprocessing
import queue
import resource
from dataclasses import dataclass
from typing import Any

from dpwise.advise.cases import Case

# what the simulation uses of torch, private or recent: their module and name
PRIVATE = (
    ("torch.distributed.fsdp", "fully_shard"),
    ("torch.testing._internal.distributed.fake_pg", "FakeStore"),
    ("torch.distributed._tools.fsdp2_mem_tracker", "FSDPMemTracker"),
    ("torch.distributed._tools.mem_tracker", "MemTracker"),
    ("torch._subclasses.fake_tensor", "FakeTensorMode"),
    ("torch._subclasses.fake_tensor", "unset_fake_temporarily"),
    ("torch.nn.parallel.distributed", "_verify_param_shape_across_processes"),
    ("torch.distributed.optim", "ZeroRedundancyOptimizer._partition_parameters"),
)
MEMORY_LIMIT = 4 * 2**30  # bytes of address space a simulation may take (fake tensors take none)
# Where the formula puts the busiest rank within this, the simulation runs real tensors: exact
# by construction, with no patch to DDP. Above it, fake tensors, which matched real ones to the
# byte on every model tested (tests/test_advise_simulate.py) once tied weights were tied again
# (before, fake tensors counted GPT-2's tied embedding twice; an earlier version also counted
# the guide's MLP's fsdp optimizer state at 6.6 MiB against 0.50 MiB, for a reason not found).
REAL_LIMIT = 1 * 2**30


@dataclass(frozen=True)
class Simulated:
    """One case simulated at a world size: the simulated rank's peak by category (bytes), or
    why not."""

    strategy: str  # the case's row
    world_size: int
    peak_bytes: int | None
    by_category: dict[str, int]
    seconds: float
    why_not: str | None = None
    tensors: str = "fake"  # "real": real tensors, no-op collectives (exact); "fake": no data
    rank: int = 0  # the rank simulated: ZeRO-1's busiest owner, else 0 (every rank alike)


def missing() -> str | None:
    """The first private API this torch lacks, named; None when it has all."""
    import importlib

    for module, name in PRIVATE:
        try:
            found = importlib.import_module(module)
        except ImportError:
            found = None
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is None:
            return f"this torch has no {module}.{name}"
    return None


def _body(spec: dict[str, Any], jobs: list[tuple[Case, bool]], world: int, rows: int,
          out: Any) -> None:  # fmt: skip
    """In the simulations' own process, under its memory limit: each case in turn (real or fake
    tensors), its peak or why not put on ``out`` as it ends."""
    import time

    from dpwise.advise import simulate_run

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, hard))
    for case, fake in jobs:
        start = time.perf_counter()
        try:
            got = simulate_run.peak(spec, case, world, rows, fake)
            out.put(("ok", got, time.perf_counter() - start))
        except Exception as exc:  # any failure of a user's model under fake tensors
            out.put(("error", _why(exc), 0.0))


def _why(exc: Exception) -> str:
    """One line: why a case could not be simulated."""
    text = str(exc).strip()
    if isinstance(exc, MemoryError) or "can't allocate memory" in text:
        return f"it ran out of its {MEMORY_LIMIT / 2**30:.0f} GiB memory limit"
    root = exc
    while root.__cause__ is not None or root.__context__ is not None:  # the first failure
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
    text = str(root).strip()
    first = text.splitlines()[0] if text else ""
    said = f"{type(root).__name__}: {first}"
    if type(root).__module__.startswith("torch._subclasses"):  # fake tensors' own refusal
        said = f"fake tensors cannot run it ({said}: a shape or value read from the data)"
    return said[:300]


def _answer(proc: Any, out: Any, timeout: float) -> tuple[str, Any, float]:
    """What the simulations' process put on ``out`` next; ("timeout", why, 0) when it did not
    come in time; ("error", why, 0) when the process ended without it (killed: the kernel's
    memory killer, a crash in native code)."""
    import time

    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        try:
            got: tuple[str, Any, float] = out.get(timeout=min(left, 0.5))
            return got
        except queue.Empty:
            if not proc.is_alive() and out.empty():
                return "error", f"its process ended without an answer ({proc.exitcode})", 0.0
    return "timeout", _late(timeout), 0.0


def _late(timeout: float) -> str:
    return f"it did not end within its {timeout:g} s"


def simulate(spec: dict[str, Any], todo: list[tuple[Case, int | None]], world: int,
             global_batch: int, timeout: float) -> list[Simulated]:  # fmt: skip
    """Each case of ``todo`` at ``world`` ranks, with the formula's figure for its busiest rank
    (None: unknown): real tensors where that is within REAL_LIMIT (exact), else fake. The cases
    run in turn in a process of their own, each within ``timeout`` seconds; after one that runs
    out of time or kills its process, a fresh process takes the rest. ``spec``: the workload
    (model, model_args, data, data_args, loss) and the optimizer."""
    reason = missing()
    if reason is not None:
        return [Simulated(case.row, world, None, {}, 0.0, reason) for case, _ in todo]
    jobs = [(case, formula is None or formula > REAL_LIMIT) for case, formula in todo]
    rows = max(1, global_batch // world)
    done: list[Simulated] = []
    while len(done) < len(jobs):
        done += _run(spec, jobs[len(done) :], world, rows, timeout)
        if done[-1].why_not == _late(timeout):  # a model that hangs would hang every case
            why = f"the case before it ran out of its {timeout:g} s; give --simulate-timeout more"
            done += [Simulated(c.row, world, None, {}, 0.0, why) for c, _ in jobs[len(done) :]]
    return done


def _run(spec: dict[str, Any], jobs: list[tuple[Case, bool]], world: int, rows: int,
         timeout: float) -> list[Simulated]:  # fmt: skip
    """``jobs`` in one process, until they end or one fails to answer (that one's failure is
    the last of the list)."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    proc = context.Process(target=_body, args=(spec, jobs, world, rows, out), daemon=True)
    proc.start()
    found = []
    try:
        for case, fake in jobs:
            status, value, seconds = _answer(proc, out, timeout)
            found.append(_simulated(case, world, fake, status, value, seconds, timeout))
            if status == "timeout" or (status == "error" and not proc.is_alive()):
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
    return found


def _simulated(case: Case, world: int, fake: bool, status: str, value: Any, seconds: float,
               timeout: float) -> Simulated:  # fmt: skip
    tensors = "fake" if fake else "real"
    if status != "ok":
        spent = timeout if status == "timeout" else 0.0
        return Simulated(case.row, world, None, {}, spent, str(value), tensors)
    rank = int(value.pop("rank", 0))
    return Simulated(case.row, world, int(value["Total"]), value, seconds, None, tensors, rank)

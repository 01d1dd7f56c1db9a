"""What one simulation runs, in its own process: PyTorch's own wrappers (DDP, with or without
ZeroRedundancyOptimizer, or FSDP2's ``fully_shard``) on a `fake` process group of N ranks (every
collective a no-op), two training steps of the model's own loss at the per-rank batch, and a
tracker from ``torch.distributed._tools`` (``FSDPMemTracker`` for FSDP2, ``MemTracker`` for
DDP) attributing the simulated rank's live tensors by category; the second step's peak is
reported (the first is a warm-up).

Tensors are real (exact: only the collectives are skipped) or fake (``FakeTensorMode``: shapes
and sizes, no data). Under fake tensors DDP needs three things PyTorch does not offer: its
construction-time check that every rank's parameters have the same shapes reads their data (it
is skipped: the ranks of a simulation are one model), its communication hook must return the
bucket (the default all-reduce's future has no value on a fake group; the hook returns the
bucket as the all-reduce does, in place), and the reducer's bucket rebuild after the first step
reads data too (it is declined: the buckets keep their construction order, the same bytes; with
real tensors too, so that the bucket is counted in the same category, a temporary, either way).

ZeRO-1 is simulated as the rank that owns the most: ZeroRedundancyOptimizer's own partition is
asked first (whole tensors, largest first), then the process group is made again as that rank.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dpwise.advise.cases import Case

TOTAL = "Total"  # the trackers' key of a snapshot's sum


def peak(spec: dict[str, Any], case: Case, world: int, rows: int, fake: bool) -> dict[str, int]:
    """The simulated rank's peak by category (bytes; "Total" among them): ``case`` on a fake
    group of ``world`` ranks, ``rows`` rows a step, with fake tensors or real ones."""
    import torch

    from dpwise.advise.footprint import map_tensors, sample
    from dpwise.workload.spec import resolve_workload

    workload = resolve_workload(spec["model"], spec["model_args"], spec["data"],
                                spec["data_args"], spec["loss"])  # fmt: skip
    x, y = sample(workload.load_data(0), rows)
    rank = _busiest_owner(workload, spec, world) if case.zero1 else 0
    with _fake_group(world, rank):
        if not fake:
            model = workload.build_model().to(case.device)
            x, y = (map_tensors(t, lambda t: t.to(case.device)) for t in (x, y))
            return {**_steps(workload, model, spec, case, x, y, fake), "rank": rank}
        from torch._subclasses.fake_tensor import FakeTensorMode

        with torch.device("meta"):  # no memory; a deepcopy in it makes no fake mode of its own
            model = workload.build_model()
        with FakeTensorMode(allow_non_fake_inputs=True):  # the meta model's tensors made fake
            _to_empty_tied(model, case.device)
            fx, fy = (map_tensors(t, _zeros) if t is not None else None for t in (x, y))
            return {**_steps(workload, model, spec, case, fx, fy, fake), "rank": rank}


def _to_empty_tied(model: Any, device: str) -> None:
    """``model.to_empty(device)``, its tied parameters tied again: to_empty gives each module a
    new Parameter where the tensor's type changes (meta to fake), so a weight two modules share
    (GPT-2's embedding and output layer) became two, and was counted twice."""
    shared: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        shared.setdefault(id(param), []).append(name)
    model.to_empty(device=device)
    for first, *others in (names for names in shared.values() if len(names) > 1):
        param = model.get_parameter(first)
        for name in others:
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner), attr, param)


@contextlib.contextmanager
def _fake_group(world: int, rank: int) -> Iterator[None]:
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _busiest_owner(workload: Any, spec: dict[str, Any], world: int) -> int:
    """The rank ZeroRedundancyOptimizer's own partition gives the most parameters (the first
    such), asked of the model on the meta device."""
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    with torch.device("meta"):
        model = workload.build_model()
    with _fake_group(world, 0):
        params = [p for p in model.parameters() if p.requires_grad]
        zero = ZeroRedundancyOptimizer(params, optimizer_class=_optimizer_class(spec))
        owned = [sum(p.numel() for g in groups for p in g["params"])
                 for groups in zero._partition_parameters()]  # type: ignore[attr-defined]  # fmt: skip
    return owned.index(max(owned))


def _steps(workload: Any, model: Any, spec: dict[str, Any], case: Case, x: Any, y: Any,
           fake: bool) -> dict[str, int]:  # fmt: skip
    """The case's wrapper over ``model``, two steps under the tracker (autocast where the case
    is in mixed precision, as dpwise trains): the second step's peak by category. The batch
    (``x``, ``y``) is counted in every case, as a rank holds it through its step."""
    from dpwise.advise.footprint import step_loss, tensors

    model, opt, tracker = (_fsdp if case.shards_model else _ddp)(model, spec, case, fake)
    if case.shards_model:  # the rank's batch, inputs and targets, made before the tracker
        tracker.track_inputs((x, y))
    else:  # MemTracker has no inputs category: its "Other"
        tracker.track_external(*tensors((x, y)))
    with tracker:
        for step in range(2):
            with _autocast(case.precision, case.device):
                loss = step_loss(workload, model, x, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if step == 0:
                tracker.reset_peak()
    snapshot = tracker.get_tracker_snapshot("peak")
    device = next(iter(snapshot))
    return {_category(k): int(v) for k, v in snapshot[device].items()}


def _category(key: Any) -> str:
    """A tracker's category as it names it ("Sharded Param", "OptState", …; "Total")."""
    value = getattr(key, "value", key)
    return str(value)


def _fsdp(model: Any, spec: dict[str, Any], case: Case, fake: bool) -> tuple[Any, Any, Any]:
    """FSDP2 over the fsdp strategy's units and the root, as dpwise's fsdp wraps them (reduce in
    float32), on a mesh of the fake group; its optimizer and FSDPMemTracker."""
    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from dpwise.strategies.fsdp import shard_units

    with _real_mode():  # the mesh is real, also under fake tensors
        mesh = init_device_mesh(torch.device(case.device).type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(reduce_dtype=torch.float32)
    for _, unit in shard_units(model):
        fully_shard(unit, mesh=mesh, mp_policy=policy,
                    reshard_after_forward=case.reshard_after_forward)  # fmt: skip
    fully_shard(model, mesh=mesh, mp_policy=policy)
    opt = _optimizer(spec, model.parameters())
    return model, opt, _peak_only(FSDPMemTracker)(model, opt)


def _ddp(model: Any, spec: dict[str, Any], case: Case, fake: bool) -> tuple[Any, Any, Any]:
    """DDP (its default buckets), with ZeroRedundancyOptimizer where the case shards the
    optimizer; MemTracker over both. Under fake tensors: the three patches of the module's
    docstring."""
    import torch.nn.parallel.distributed as ddp_module
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.optim import ZeroRedundancyOptimizer

    check = ddp_module._verify_param_shape_across_processes
    if fake:
        ddp_module._verify_param_shape_across_processes = lambda *a, **k: None
    try:
        unused = bool(spec.get("find_unused_parameters"))  # as advise's launch line says
        wrapped = ddp_module.DistributedDataParallel(model, find_unused_parameters=unused)
    finally:
        ddp_module._verify_param_shape_across_processes = check
    wrapped.register_comm_hook(None, _bucket_as_is)
    wrapped.reducer = _NoRebuild(wrapped.reducer)  # real tensors too: the same categories
    if case.zero1:
        opt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=_optimizer_class(spec),
                                      **_optimizer_args(spec))  # fmt: skip
    else:
        opt = _optimizer(spec, wrapped.parameters())
    tracker = _peak_only(MemTracker)()
    tracker.track_external(wrapped, opt)
    return wrapped, opt, tracker


def _peak_only(tracker: type) -> type:
    """``tracker`` (MemTracker or FSDPMemTracker) keeping the rank's peak only: after each op
    it would also update every module's own peak, a walk over all modules per op (minutes on a
    7 B model); and with a way to start the peak again after the warm-up step (its own
    ``reset_mod_stats`` clears the modules' figures, not the peak)."""

    class PeakOnly(tracker):
        def _update_peak_stats(self, peak_state: Any) -> None:
            for dev, snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < snap[TOTAL]:
                    self._peak_mem[dev] = snap[TOTAL]
                    self._peak_mem_snap[dev] = dict(snap)

        def reset_peak(self) -> None:
            self.reset_mod_stats()  # it refuses a module's second forward otherwise
            self._peak_mem.clear()
            self._peak_mem_snap.clear()

    return PeakOnly


def _bucket_as_is(state, bucket):
    """DDP's communication hook on a fake group: the bucket, as the all-reduce leaves it (in
    place; the bytes are the same). Not annotated: DDP checks a hook's annotations against its
    own types, and these would be strings here."""
    import torch

    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


class _NoRebuild:
    """DDP's reducer, its bucket rebuild declined (it reads the fake tensors' data)."""

    def __init__(self, reducer: Any) -> None:
        self._reducer = reducer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)

    def _rebuild_buckets(self) -> bool:
        return False


@contextlib.contextmanager
def _real_mode() -> Iterator[None]:
    """Fake tensor mode, if one is on, set aside."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        yield


def _zeros(t: Any) -> Any:
    """A tensor of ``t``'s shape and dtype made under the fake mode (zeros: class indices and
    token ids stay in range)."""
    import torch

    return torch.zeros(t.shape, dtype=t.dtype)


def _autocast(precision: str, device: str) -> contextlib.AbstractContextManager[Any]:
    """Autocast to bf16 or fp16 as dpwise trains in mixed precision; fp32: nothing."""
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return torch.autocast(torch.device(device).type, dtype=dtype)


def _optimizer_class(spec: dict[str, Any]) -> Any:
    import torch

    return torch.optim.SGD if spec["optimizer"] == "sgd" else torch.optim.AdamW


def _optimizer_args(spec: dict[str, Any]) -> dict[str, Any]:
    """Without foreach (nor fused): under fake tensors their grouped kernels are counted at
    full, unsharded shapes."""
    if spec["optimizer"] == "sgd":
        return {"lr": 0.01, "momentum": spec["momentum"], "foreach": False}
    return {"lr": 1e-3, "foreach": False, "fused": False}


def _optimizer(spec: dict[str, Any], params: Any) -> Any:
    return _optimizer_class(spec)(params, **_optimizer_args(spec))

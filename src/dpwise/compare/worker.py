"""What each process of one comparison run executes: its repeats and its probe, turn by turn.

Every run lives in its own process (ddp × W: the elastic launcher's workers), so its peak RSS is
its own and nothing it allocated stays behind in the parent.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch.distributed as dist

from dpwise.compare.matrix import RunSpec
from dpwise.compare.measurement import Repeats, profiled_probe
from dpwise.compare.settings import CompareConfig
from dpwise.compare.turns import Heartbeat, TurnClient
from dpwise.errors import DpwiseError
from dpwise.infra import scratch
from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.infra.interrupts import release
from dpwise.launch import forking
from dpwise.launch.elastic import launch, run_guarded
from dpwise.launch.env import DistEnv
from dpwise.link.probe import probe_link
from dpwise.link.settings import MIN_PROBE_BYTES
from dpwise.results.records import DevicePeak, Memory, Run, Spread
from dpwise.strategies import make_strategy, traits
from dpwise.strategies.base import StrategyFacts
from dpwise.strategies.traits import VISIBLE
from dpwise.train.plan import RunPlan, resolve
from dpwise.workload.spec import workload_for

Address = tuple[str, int]
LINK_ITERS = 10  # timed operations per message size in compare's link probe (probe-link: 20)


def _plan(spec: RunSpec, cfg: CompareConfig, env: DistEnv) -> RunPlan:
    """The run's plan, resolved as `dpwise train` resolves one, on the GPUs the run may use.

    Only a run of several processes is launched; a multi-process strategy's run of one process
    trains here, in a one-member process group (_local_group).
    """
    hw = Hardware.detect()
    own = replace(hw, cuda_devices=min(hw.cuda_devices, spec.world_size))
    plan = resolve(cfg.train_config(spec.strategy, spec.world_size), own, env)
    return replace(plan, launch=plan.launch and spec.launched)


def _local_group(spec: RunSpec, plan: RunPlan) -> bool:
    """A run of one process whose strategy needs a process group gets a one-member group on an
    in-memory store."""
    if not traits(spec.strategy).process_group or spec.launched or dist.is_initialized():
        return False
    dist.init_process_group(plan.backend, store=dist.HashStore(), rank=0, world_size=1)
    return True


def run_process(
    spec: RunSpec, cfg: CompareConfig, address: Address, server: forking.Lent | None = None
) -> None:
    """The target of a run's process; a run of W processes starts its workers through the
    launcher, forked from ``server`` (the fork server that forked this process: forking.lend)."""
    Heartbeat(address, spec.id).start()  # first: a stop or hang from here on is seen
    client = TurnClient(address, spec.id)
    try:
        forking.borrow(server)
        release()  # held since the fork server started (dpwise.launch.forking)
        if spec.launched:
            launch(_plan(spec, cfg, DistEnv()).launch_settings, rank_entry, spec, cfg, address)
        else:
            serve(spec, cfg, client)
    except KeyboardInterrupt as exc:  # a signal to this run's process alone (SIGTERM, SIGINT)
        signum = getattr(exc, "signum", signal.SIGINT)
        client.signalled(signum)  # the parent names the run, this pid and the signal
        raise SystemExit(128 + signum) from None
    except BaseException as exc:
        client.fail(exc)
        raise SystemExit(2 if isinstance(exc, DpwiseError) else 1) from None


def rank_entry(spec: RunSpec, cfg: CompareConfig, address: Address) -> None:
    """What each launched worker of a run of W processes executes.

    A worker's failure reaches the parent through its launcher (run_process), which knows the
    root cause: the first rank that failed, or a stopped peer the others timed out waiting for.
    """
    env = DistEnv.from_environ()
    client = TurnClient(address, spec.id, is_main=env.rank == 0)
    run_guarded(serve, spec, cfg, client)


def serve(spec: RunSpec, cfg: CompareConfig, client: TurnClient) -> None:
    env = DistEnv.from_environ()
    threads = configure_threads(cfg.threads, spec.world_size if spec.launched else 1)
    plan = _plan(spec, cfg, env)
    workload = workload_for(cfg)
    data = workload.load_data(cfg.seed)
    own_group = _local_group(spec, plan)
    strategy = make_strategy(plan.strategy, env)
    strategy.setup()
    try:
        client.ready()
        repeats = Repeats(plan, strategy, workload, data)
        final = Path("runs") / spec.id / "final.pt"
        for r in range(cfg.repeats):
            client.wait(f"repeat-{r}")
            repeats.run(cfg.out / final if strategy.is_main else None)
            client.done(f"repeat-{r}")
        client.wait("probe")
        record = _probe(spec, cfg, plan, strategy, workload, data, repeats, threads, final)
        client.done("probe", json.dumps(record.to_json(), default=str))
    finally:
        strategy.teardown()
        if own_group:
            dist.destroy_process_group()


def _probe(spec, cfg, plan, strategy, workload, data, repeats, threads, final) -> Run:
    timing = repeats.timing()  # read before the probe: peak RSS describes the training
    with scratch.folder("trace") as tmp:
        trace = Path("traces") / f"{spec.id}.rank0.json"
        where = cfg.out / trace if strategy.is_main else tmp / "trace.json"
        probe = profiled_probe(
            spec, plan, strategy, workload, data, where, cfg.profile_steps, last_work=True
        )
    link = _link_probe(spec, strategy, probe)  # the run's last work: nothing else measured after
    mine = {
        "live": probe.get("live_tensor_bytes"),
        "rss": timing["peak_rss_bytes"],
        "device": str(strategy.device),
        "pid": os.getpid(),
        "diverged": repeats.first["diverged"],
    }
    ranks = strategy.all_gather_object(mine)
    run = _record(spec, strategy, threads, timing, repeats.first, probe, ranks, final, trace)
    return replace(run, link_probe=link)


def _link_probe(spec: RunSpec, strategy, probe: dict[str, Any]) -> dict[str, Any] | None:
    """The link between a run's processes, timed up to its gradient bytes (dpwise.link): the
    collectives of its strategy (all_reduce; reduce_scatter and all_gather where it shards)."""
    kind = traits(spec.strategy)
    if not (kind.process_group and spec.launched and spec.world_size >= 2):
        return None
    ops = ("all_reduce", "reduce_scatter", "all_gather") if kind.shards_model else ("all_reduce",)
    gradient_bytes = max(MIN_PROBE_BYTES, probe["communication"]["gradient_bytes"])
    return probe_link(gradient_bytes, ops, device=strategy.device, max_iters=LINK_ITERS)


def _memory(spec: RunSpec, first: dict[str, Any], ranks: list[dict[str, Any]]) -> Memory:
    if spec.device_type == "cuda":
        per_device = tuple(
            DevicePeak(rank=p["rank"], device=p["device"], peak_bytes=p["bytes"])
            for p in first["peak_memory"]
        )
        kind = "cuda_max_memory_allocated"
    else:
        per_device = tuple(
            DevicePeak(rank=r, device="cpu", peak_bytes=m["live"]) for r, m in enumerate(ranks)
        )
        kind = "cpu_live_tensors"
    return Memory(kind=kind, per_device=per_device, peak_rss_bytes=tuple(m["rss"] for m in ranks))


def _record(spec, strategy, threads, timing, first, probe, ranks, final, trace) -> Run:
    facts = strategy.describe()
    return Run(
        id=spec.id,
        label=spec.label,
        strategy=spec.strategy,
        world_size=spec.world_size,
        backend=facts.backend,
        devices=tuple(_devices(spec, facts, ranks)),
        threads_per_process=threads,
        notes=facts.notes,
        epoch_seconds=Spread.from_json(timing["epoch_seconds"]),
        samples_per_s=Spread.from_json(timing["samples_per_s"]),
        other_cpu_share=Spread.from_json(timing["other_cpu_share"]),
        samples_per_epoch=timing["samples_per_epoch"],
        training_seconds=timing["training_seconds"],
        losses=tuple(first["losses"]),
        final_state=str(final),
        memory=_memory(spec, first, ranks),
        communication=probe.get("communication"),
        sync_points_per_step=probe.get("sync_points_per_step"),
        trace=str(trace),
        pids=tuple(m["pid"] for m in ranks),  # every run has processes of its own
        diverged=first_divergence(m["diverged"] for m in ranks),
    )


def _devices(spec: RunSpec, facts: StrategyFacts, ranks: list[dict[str, Any]]) -> list[str]:
    """Each process's own device, or every device the one process drives."""
    if traits(spec.strategy).devices == VISIBLE:
        return list(facts.devices)
    return [m["device"] for m in ranks]


def first_divergence(found: Any) -> dict[str, Any] | None:
    """The earliest non-finite loss any process of a run saw (each sees only its own rows)."""
    return min((d for d in found if d is not None), key=lambda d: d["step"], default=None)

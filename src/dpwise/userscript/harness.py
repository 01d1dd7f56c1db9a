"""Runs a training script, unedited, for `dpwise migrate --verify`: in each worker of a verify
launch (``worker``: dpwise's launcher, torch's elastic agent, as torchrun runs it), or by hand as
`python -m dpwise.userscript.harness SCRIPT [ARGS]`, alone or under torchrun.

What it fixes, from the environment (the script is never changed):
- DPWISE_SCRIPT_SEED: `torch.manual_seed` before the script runs;
- a shuffling `RandomSampler` visits the order `DistributedSampler(seed=0)` gives in the same
  epoch (`randperm(n)` seeded with the epoch), so the original's batches are the migrated
  script's global batches;
- DPWISE_SCRIPT_STEPS: after that many optimizer steps the run stops; rank 0 saves the
  optimizer's parameters before the first step and after the last, in order, to
  DPWISE_SCRIPT_OUT (names are not needed: a wrapper does not change the order), with what in
  the model can make parallel runs differ (`dpwise.userscript.causes`: BatchNorm, random layers);
- DPWISE_SCRIPT_MEASURE: each rank also writes what it measured (its steps' end times, rows and
  digests: dpwise.userscript.meter; its peak memory) to `measure-rank<R>.json` beside
  DPWISE_SCRIPT_OUT;
- DPWISE_SCRIPT_PATH: the folder the original script lives in (for its sibling imports);
- on a machine without CUDA, `cuda` placements run on the CPU (`.cuda()`, `.to(0)`,
  `device_count() == 1`) so that a GPU script can be checked here.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import resource
import runpy
import sys
from collections.abc import Iterator
from typing import Any

import torch

from dpwise.userscript.meter import Meter
from dpwise.userscript.probe import Probe

MARK = "dpwise-verify:"  # starts the line that says why a run ended too early
ENDED = "verify-ended-rank"  # + the rank: the file that says it, beside DPWISE_SCRIPT_OUT
MEASURED = "measure-rank"  # + the rank + ".json": what DPWISE_SCRIPT_MEASURE has each rank write
LOG = "verify-rank"  # + the rank + ".log": a launched worker's output, beside DPWISE_SCRIPT_OUT
LIMIT_MARK = "Timeout ("  # how faulthandler's dump at the time limit begins


class _Done(BaseException):
    """Raised from the optimizer hook to end the script after the last counted step."""


def _fixed_order() -> None:
    from torch.utils.data import RandomSampler

    passes: dict[int, int] = {}

    def __iter__(self: RandomSampler) -> Iterator[int]:
        # the pass over this data set (a loader built anew every epoch counts on), as a
        # shuffling loader draws a new order from the global generator on every pass
        epoch = passes.get(id(self.data_source), 0)
        passes[id(self.data_source)] = epoch + 1
        generator = torch.Generator()
        generator.manual_seed(epoch)
        yield from torch.randperm(len(self.data_source), generator=generator).tolist()

    RandomSampler.__iter__ = __iter__  # type: ignore[method-assign]  # the order replaced, on purpose

    from torch.utils.data.distributed import DistributedSampler

    shuffled = DistributedSampler.__iter__

    def counted(self: DistributedSampler[Any]) -> Iterator[Any]:
        """The first epoch a script sets counts as 0 (`for epoch in range(1, n + 1)` too), as
        the original's first pass; an epoch never set stays 0, so a missing `set_epoch` shows."""
        first = getattr(DistributedSampler, "_verify_first", None)
        if first is None:
            first = DistributedSampler._verify_first = self.epoch  # type: ignore[attr-defined]  # our mark on torch's class
        epoch = self.epoch
        self.epoch = epoch - first
        try:
            yield from shuffled(self)
        finally:
            self.epoch = epoch

    DistributedSampler.__iter__ = counted  # type: ignore[method-assign]  # the epoch counted from the first, on purpose


def _params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p.detach().cpu().clone() for g in optimizer.param_groups for p in g["params"]]


def _stop_after(steps: int, out: str) -> list[int]:
    """Hooks every optimizer; the list returned counts the steps taken."""
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    from dpwise.userscript.causes import Watch

    done: list[int] = []
    initial: list[list[torch.Tensor]] = []
    main = int(os.environ.get("RANK", "0")) == 0
    watch = Watch()
    meter = Meter().install() if os.environ.get("DPWISE_SCRIPT_MEASURE") else None
    probe = Probe.from_env(out) if meter is not None else None  # DPWISE_SCRIPT_PROFILE's window

    def before(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not initial:
            initial.append(_params(optimizer))
            if main:
                watch.start(optimizer)

    def after(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        done.append(1)
        if probe is not None:  # before the meter closes the step: its start and stop are in it
            probe.step(optimizer)
        if meter is not None:
            meter.step()
        if len(done) == 2:  # the forwards between the first two steps were watched
            watch.stop()
        if len(done) < steps:
            return
        if meter is not None:
            meter.remove()
            _write_measured(meter, out, probe)
        if main:
            final = _params(optimizer)
            state = {"initial": initial[0], "final": final, "causes": watch.causes()}
            torch.save({**state, **_together()}, out)
        raise _Done

    register_optimizer_step_pre_hook(before)
    register_optimizer_step_post_hook(after)
    return done


def _write_measured(meter: Meter, out: str, probe: Probe | None = None) -> None:
    """This rank's steps and peak memory, beside ``out``; its profiled window's figures."""
    rank = os.environ.get("RANK", "0")
    doc = {"rank": int(rank), **meter.record.to_json(), "peak_memory": peak_memory(),
           "threads": torch.get_num_threads()}  # fmt: skip
    if probe is not None:
        doc["profile"] = probe.result()
    path = os.path.join(os.path.dirname(out), f"{MEASURED}{rank}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def peak_memory() -> dict[str, Any]:
    """The CUDA allocator's peak on every device this process used (DataParallel: every visible
    one), else the process's peak resident memory (the CPU: what the operating system saw)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        peaks = {
            f"cuda:{d}": torch.cuda.max_memory_allocated(d)
            for d in range(torch.cuda.device_count())
        }
        return {"kind": "cuda_max_memory_allocated", "bytes": {k: v for k, v in peaks.items() if v}}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    return {"kind": "cpu_peak_rss", "bytes": {"cpu": rss}}


def _together() -> dict[str, int]:
    """How the run trained: the process group's size (1 without one) and the DDP wrappers."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    ddp = sum(issubclass(type(o), DistributedDataParallel) for o in gc.get_objects())
    return {"world_size": world, "ddp_models": ddp}


def _cpu(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return "cpu"
    if isinstance(value, str) and value.startswith("cuda"):
        return "cpu"
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("cpu")
    return value


def _cpu_stand_in() -> None:
    if torch.cuda.is_available():
        return
    torch.cuda.device_count = lambda: 1
    for cls in (torch.Tensor, torch.nn.Module):
        to = cls.to

        def moved(self: Any, *args: Any, _to: Any = to, **kwargs: Any) -> Any:
            if "device" in kwargs:
                kwargs["device"] = _cpu(kwargs["device"])
            return _to(self, *[_cpu(a) for a in args], **kwargs)

        cls.to = moved  # type: ignore[method-assign]  # placements on the CPU, on purpose
        cls.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]  # as above


def _leave_group() -> None:
    """A migrated script stopped mid-training leaves its process group in step with the others
    (a worker that exits with the group still open can abort in gloo's teardown)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    from torch.nn.parallel import DistributedDataParallel

    dist.barrier()
    gc.collect()
    for obj in gc.get_objects():  # as the migration's `_dist_teardown`: reducers go first
        if issubclass(type(obj), DistributedDataParallel):
            obj.reducer = None
            obj.logger = None
    dist.destroy_process_group()


def _run(script: str, as_file: str) -> None:
    """Run `script` as `__main__`, its `__file__` being `as_file`: a migrated copy reads the files
    beside the original (`Path(__file__).with_name("config.json")`)."""
    if as_file == script:
        runpy.run_path(script, run_name="__main__")
        return
    with open(script, encoding="utf-8") as f:
        code = compile(f.read(), as_file, "exec")
    exec(code, {"__name__": "__main__", "__file__": as_file, "__builtins__": __builtins__})


def main(argv: list[str]) -> int:
    script = argv[0]
    sys.path.insert(0, os.environ.get("DPWISE_SCRIPT_PATH") or os.path.dirname(script))
    torch.manual_seed(int(os.environ.get("DPWISE_SCRIPT_SEED", "0")))
    _fixed_order()
    steps = int(os.environ["DPWISE_SCRIPT_STEPS"])
    done = _stop_after(steps, os.environ["DPWISE_SCRIPT_OUT"])
    _cpu_stand_in()
    sys.argv = list(argv)
    try:
        _run(script, os.environ.get("DPWISE_SCRIPT_AS") or script)
    except _Done:
        _leave_group()
        return 0
    except SystemExit as exc:  # sys.exit(3), SystemExit("message"): the script's own exit
        if exc.code not in (None, 0):
            code = exc.code if isinstance(exc.code, int) else 1
            _say_ended(f"it exited with code {code} after {len(done)} of {steps} steps")
            raise
    why = _short(len(done), steps)
    rank = _say_ended(why)
    if rank != 0:
        raise SystemExit(3)
    raise SystemExit(f"{MARK} {why}")


def _say_ended(why: str) -> int:
    """Leave why the run ended early beside DPWISE_SCRIPT_OUT; returns this worker's rank.

    Every rank leaves it in its own file: the first to end is the one torchrun sees, and it
    stops the others, maybe before they print (their lines would interleave besides)."""
    rank = int(os.environ.get("RANK", "0"))
    out = os.environ["DPWISE_SCRIPT_OUT"]
    with open(os.path.join(os.path.dirname(out), f"{ENDED}{rank}"), "w", encoding="utf-8") as f:
        f.write(why)
    return rank


def _short(taken: int, steps: int) -> str:
    if taken == 0:
        return "it ended without an optimizer step (no optimizer.step() was reached)"
    return (
        f"it ended after {taken} of {steps} optimizer steps: give it more data or epochs "
        f"through --script-args, or lower --verify-steps to {taken}"
    )


def worker(argv: list[str], limit: float) -> None:
    """What each worker of a verify launch runs (the launcher's entry point)."""
    from dpwise.launch.elastic import run_guarded

    run_guarded(_launched, argv, limit)


def _launched(argv: list[str], limit: float) -> None:
    """The script, as a torchrun worker would run it, with its output in its own log: in the
    folder of DPWISE_SCRIPT_OUT (what it writes stays there), with the threads torchrun gives
    (OMP_NUM_THREADS; torch was imported before it was set), and ended with its stacks in the log
    when ``limit`` seconds have passed (a script that loops or waits forever)."""
    folder = os.path.dirname(os.environ["DPWISE_SCRIPT_OUT"])
    log = open(os.path.join(folder, f"{LOG}{os.environ.get('RANK', '0')}.log"), "w")  # noqa: SIM115
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.chdir(os.environ.get("DPWISE_SCRIPT_CWD") or folder)  # compare: the user's own folder
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    faulthandler.dump_traceback_later(limit, exit=True, file=log)
    try:
        main(argv)
    finally:
        faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

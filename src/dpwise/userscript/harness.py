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
- DPWISE_SCRIPT_MEASURE: each rank also writes what it measured (its steps' end times, rows,
  and the rows' digests and row sets in the first DPWISE_SCRIPT_READ steps, or every step's:
  dpwise.measure.meter; its peak memory) to `measure-rank<R>.json` beside DPWISE_SCRIPT_OUT;
- DPWISE_SCRIPT_FEWER: "FLAG UNTIMED", the flag that lowers the steps of a script that ended
  too early, after its untimed ones (compare's --max-steps); without it, migrate --verify's;
- DPWISE_SCRIPT_PATH: the folder the original script lives in (for its sibling imports);
- on a machine without CUDA, `cuda` placements run on the CPU so that a GPU script can be
  checked here, and DPWISE_SCRIPT_PORT is where a script's process group meets
  (dpwise.userscript.standin: every stand-in);
- DPWISE_SCRIPT_KIND: how the script is launched (userscript.kind). One that is not run under
  torchrun ("spawns", "dataparallel", "single") sees none of the launcher's variables (RANK,
  MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE …), as when its user runs `python script.py`; the
  processes a "spawns" script starts itself (`torch.multiprocessing.spawn`, `start_processes`)
  each run under the same conditions as a torchrun rank (``spawning``), with their output in
  their own logs; a rank's file names use its process group's rank, else its spawn index.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import multiprocessing
import os
import resource
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import torch

from dpwise.measure.meter import Meter
from dpwise.userscript import standin
from dpwise.userscript.probe import Probe

MARK = "dpwise-verify:"  # starts the line that says why a run ended too early
ENDED = "verify-ended-rank"  # + the rank: the file that says it, beside DPWISE_SCRIPT_OUT
MEASURED = "measure-rank"  # + the rank + ".json": what DPWISE_SCRIPT_MEASURE has each rank write
LOG = "verify-rank"  # + the rank + ".log": a launched worker's output, beside DPWISE_SCRIPT_OUT
MAIN_LOG = "verify-main.log"  # the output of a "spawns" script's own process, beside it
FAILED = "failed-rank"  # + the rank: what a process the script spawned raised, beside it
DEADLINE = "verify-deadline"  # when the time limit ends, the same for every worker: beside it
LIMIT_MARK = "Timeout ("  # how faulthandler's dump at the time limit begins
# torchrun's variables for its workers (torch's LocalElasticAgent), which a script launched
# otherwise does not see
LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_NAME",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
)

_child: list[int] = []  # in a process the script spawned: its spawn index
_limit: dict[str, Any] = {}  # the time limit: its "deadline" (time.monotonic) and dump "file"
_undo: list[Callable[[], None]] = []  # removes this process's step hooks (a fork's parent's)
_passes: dict[int, int] = {}  # the passes over each data set (RandomSampler's order)
_given_rank: list[int] = []  # the launcher's RANK, once its variables are out of the script's sight


class _Done(BaseException):
    """Raised from the optimizer hook to end the script after the last counted step."""


def rank() -> int:
    """This process's rank: its process group's in a process the script spawned (else its
    spawn index), torchrun's RANK otherwise."""
    if _child:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return _child[0]
    return _given_rank[0] if _given_rank else int(os.environ.get("RANK", "0"))


def _fixed_order() -> None:
    from torch.utils.data import RandomSampler
    from torch.utils.data.distributed import DistributedSampler

    _passes.clear()
    if hasattr(DistributedSampler, "_verify_first"):  # a fork's parent's first epoch
        del DistributedSampler._verify_first
    if getattr(RandomSampler.__iter__, "_dpwise", False):  # installed already (a fork's parent)
        return
    passes = _passes

    def __iter__(self: RandomSampler) -> Iterator[int]:
        # the pass over this data set (a loader built anew every epoch counts on), as a
        # shuffling loader draws a new order from the global generator on every pass
        epoch = passes.get(id(self.data_source), 0)
        passes[id(self.data_source)] = epoch + 1
        generator = torch.Generator()
        generator.manual_seed(epoch)
        yield from torch.randperm(len(self.data_source), generator=generator).tolist()

    __iter__._dpwise = True  # type: ignore[attr-defined]  # our mark: installed
    RandomSampler.__iter__ = __iter__  # type: ignore[method-assign]  # the order replaced, on purpose

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
    watch = Watch()
    read = os.environ.get("DPWISE_SCRIPT_READ")  # the steps whose rows are read (all: unset)
    measure = os.environ.get("DPWISE_SCRIPT_MEASURE")
    meter = Meter(int(read) if read else None).install() if measure else None
    probe = Probe.from_env(out, rank) if meter is not None else None  # its profiled window

    def before(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not initial:
            initial.append(_params(optimizer))
            if rank() == 0:
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
        if rank() == 0:
            final = _params(optimizer)
            state = {"initial": initial[0], "final": final, "causes": watch.causes()}
            torch.save({**state, **_together()}, out)
        raise _Done

    hooks = [register_optimizer_step_pre_hook(before), register_optimizer_step_post_hook(after)]
    _undo.extend(hook.remove for hook in hooks)
    if meter is not None:
        _undo.append(meter.remove)
    return done


def instrument(steps: int, out: str) -> Callable[[], None]:
    """The step hooks, meter and probe a launched script's process runs under (as the
    environment asks), installed in this process; the function returned removes them
    (bench/script_overhead.py pairs steps with and without them)."""
    _stop_after(steps, out)

    def undo() -> None:
        for remove in _undo:
            remove()
        _undo.clear()

    return undo


def _write_measured(meter: Meter, out: str, probe: Probe | None = None) -> None:
    """This rank's steps, peak memory and threads, beside ``out``; its profiled window's
    figures."""
    doc = {"rank": rank(), **meter.record.to_json(), "peak_memory": peak_memory(),
           "threads": torch.get_num_threads()}  # fmt: skip
    if probe is not None:
        doc["profile"] = probe.result()
    path = os.path.join(os.path.dirname(out), f"{MEASURED}{rank()}.json")
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
    if os.environ.get("DPWISE_SCRIPT_KIND", "torchrun") != "torchrun":
        _given_rank[:] = [rank()]
        for name in LAUNCHER_VARS:
            os.environ.pop(name, None)
    sys.path.insert(0, os.environ.get("DPWISE_SCRIPT_PATH") or os.path.dirname(script))
    torch.manual_seed(int(os.environ.get("DPWISE_SCRIPT_SEED", "0")))
    _fixed_order()
    steps = int(os.environ["DPWISE_SCRIPT_STEPS"])
    done = _stop_after(steps, os.environ["DPWISE_SCRIPT_OUT"])
    standin.install()
    standin.use_port()
    _spawning()
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
    if _spawned_here and os.path.exists(os.environ["DPWISE_SCRIPT_OUT"]):
        return 0  # its processes took the steps (started without join, joined by the script)
    why = _short(len(done), steps)
    ended = _say_ended(why)
    if ended != 0:
        raise SystemExit(3)
    raise SystemExit(f"{MARK} {why}")


def _say_ended(why: str) -> int:
    """Leave why the run ended early beside DPWISE_SCRIPT_OUT; returns this worker's rank.

    Every rank leaves it in its own file: the first to end is the one torchrun sees, and it
    stops the others, maybe before they print (their lines would interleave besides). A
    "spawns" script's own process leaves none where one of its processes did."""
    folder = os.path.dirname(os.environ["DPWISE_SCRIPT_OUT"])
    mine = rank()
    if _spawned_here and any(name.startswith(ENDED) for name in os.listdir(folder)):
        return mine
    with open(os.path.join(folder, f"{ENDED}{mine}"), "w", encoding="utf-8") as f:
        f.write(why)
    return mine


# -- the processes a script starts itself ------------------------------------------------------
_spawned_here: list[int] = []  # in the script's own process: the counts of processes it started


@dataclass
class _Child:
    """What a process the script spawned needs to run its function under the harness."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    nprocs: int
    deadline: float | None  # the time limit's end (time.monotonic: the machine's clock)


def _spawning() -> None:
    """A script's `torch.multiprocessing.spawn` and `start_processes` start processes that run
    the harness first (``_spawned``); on the CPU forked (standin). Once they have all ended
    after the steps (a join), the script's own process stops too: the training is over."""
    module = sys.modules["torch.multiprocessing.spawn"]
    start = module.start_processes

    def start_processes(
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        nprocs: int = 1,
        join: bool = True,
        daemon: bool = False,
        start_method: str = "spawn",
    ) -> Any:
        fork = standin.active() and "fork" in multiprocessing.get_all_start_methods()
        _spawned_here.append(nprocs)
        child = _Child(fn, tuple(args), nprocs, _limit.get("deadline"))
        with _limit_paused():
            context = start(
                _spawned, (child,), nprocs, False, daemon, "fork" if fork else start_method
            )
        if not join:
            return context
        while not context.join():
            pass
        if os.path.exists(os.environ["DPWISE_SCRIPT_OUT"]):
            raise _Done
        return None

    # what `spawn` calls, and `mp.start_processes`: replaced on purpose (a module's attribute)
    module.start_processes = start_processes  # type: ignore[attr-defined]  # see above
    torch.multiprocessing.start_processes = start_processes


@contextlib.contextmanager
def _limit_paused() -> Iterator[None]:
    """The time limit's watchdog off while processes are forked: a forked child cannot re-arm
    a watchdog thread it did not inherit (faulthandler would wait for it forever)."""
    if _limit:
        faulthandler.cancel_dump_traceback_later()
    try:
        yield
    finally:
        _arm_limit()


def _arm_limit() -> None:
    if _limit:
        left = max(_limit["deadline"] - time.monotonic(), 0.001)
        faulthandler.dump_traceback_later(left, exit=True, file=_limit["file"])


def _spawned(index: int, child: _Child) -> None:
    """A process the script spawned: its output in its own log, the time limit left, the seed,
    the sampler's order and the step hooks as a torchrun rank has them, then the script's
    function. Its threads are torchrun's for several workers (one each, unless
    OMP_NUM_THREADS says)."""
    _child[:] = [index]
    _spawned_here.clear()
    out = os.environ["DPWISE_SCRIPT_OUT"]
    if child.deadline is not None:
        log = _own_log(os.path.join(os.path.dirname(out), f"{LOG}{index}.log"))
        _limit.update(deadline=child.deadline, file=log)
        _arm_limit()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    elif child.nprocs > 1:
        torch.set_num_threads(1)
    for undo in _undo:
        undo()
    _undo.clear()
    torch.manual_seed(int(os.environ.get("DPWISE_SCRIPT_SEED", "0")))
    _fixed_order()
    standin.install()  # where a fresh interpreter runs it (spawn); a fork has them already
    standin.use_port()
    steps = int(os.environ["DPWISE_SCRIPT_STEPS"])
    done = _stop_after(steps, out)
    try:
        child.fn(index, *child.args)
    except _Done:
        _leave_group()
        return
    except Exception as exc:
        traceback.print_exc()  # into its log: torch's wrapper hands it to the parent only
        _say_failed(exc)
        raise
    _say_ended(_short(len(done), steps))
    raise SystemExit(3)


def _say_failed(exc: BaseException) -> None:
    """Leave what this spawned process raised beside DPWISE_SCRIPT_OUT: its rank, the error and
    the script's line that raised it (the innermost frame in the script's folder)."""
    frames = traceback.extract_tb(exc.__traceback__)
    home = os.path.abspath(os.environ.get("DPWISE_SCRIPT_PATH") or ".")
    own = [f for f in frames if os.path.abspath(f.filename).startswith(home + os.sep)]
    where = ""
    if own or frames:
        frame = (own or frames)[-1]
        code = f": {frame.line.strip()}" if frame.line else ""
        where = f" at {os.path.basename(frame.filename)} line {frame.lineno}, in {frame.name}{code}"
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    folder = os.path.dirname(os.environ["DPWISE_SCRIPT_OUT"])
    with open(os.path.join(folder, f"{FAILED}{rank()}"), "w", encoding="utf-8") as f:
        f.write(f"rank {rank()} raised {error}{where}")


def _own_log(path: str) -> IO[str]:
    """This process's output (its file descriptors 1 and 2) into ``path``."""
    log = open(path, "w")  # noqa: SIM115
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    return log


def _short(taken: int, steps: int) -> str:
    """Why the script ended too early, and the flag that fixes it: DPWISE_SCRIPT_FEWER ("FLAG
    UNTIMED": compare's --max-steps after its untimed steps), else migrate --verify's."""
    if taken == 0:
        return "it ended without an optimizer step (no optimizer.step() was reached)"
    fewer = os.environ.get("DPWISE_SCRIPT_FEWER")
    if fewer is None:
        return (
            f"it ended after {taken} of {steps} optimizer steps: give it more data or epochs "
            f"through --script-args, or lower --verify-steps to {taken}"
        )
    flag, _, untimed = fewer.partition(" ")
    timed = taken - int(untimed or 0)
    lower = f", or lower {flag} to {timed}" if timed > 0 else ""
    return (
        f"it ended after {taken} of {steps} optimizer steps: give it more data or epochs in "
        f"its command line{lower}"
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
    spawns = os.environ.get("DPWISE_SCRIPT_KIND") == "spawns"
    log = _own_log(os.path.join(folder, MAIN_LOG if spawns else f"{LOG}{rank()}.log"))
    os.chdir(os.environ.get("DPWISE_SCRIPT_CWD") or folder)  # compare: the user's own folder
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    _limit.update(deadline=_shared_deadline(folder, limit), file=log)
    _arm_limit()
    try:
        main(argv)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _shared_deadline(folder: str, limit: float) -> float:
    """The time limit's end (time.monotonic: the machine's clock), the same for every worker of
    the launch: the first to start sets it in DEADLINE beside DPWISE_SCRIPT_OUT. So every worker
    leaves its stack at once, before the launcher stops the others at the first one's exit."""
    path = os.path.join(folder, DEADLINE)
    mine = os.path.join(folder, f"{DEADLINE}.{os.getpid()}")
    with open(mine, "w", encoding="utf-8") as f:
        f.write(repr(time.monotonic() + limit))
    try:
        os.link(mine, path)  # whole, or not at all: only the first worker's stands
    except FileExistsError:
        pass
    finally:
        os.unlink(mine)
    with open(path, encoding="utf-8") as f:
        return float(f.read())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

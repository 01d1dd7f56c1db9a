"""DDP teardown stress: many `dpwise train --strategy ddp --nproc 2` runs, counting hangs.

Each run trains a transformer-sized model for a few steps in a fresh `python -m dpwise` process
group, with a wall-clock limit. A run that passes the limit (or that dpwise's teardown watchdog
stopped) counts as hung; a non-zero exit or a missing final.pt counts as failed. With --load N,
N busy-loop processes compete for the cores for the whole loop (the hang was likelier under load).

    python bench/ddp_teardown_stress.py --runs 50 [--workload gpt2|transformer] [--load 1]

prints one line per run and a summary: `50 runs: 0 hung, 0 failed, median 9.1 s`.

    python bench/ddp_teardown_stress.py --cycles 100 --tries 3

is the fast, side-by-side form: two worker processes each run many train-and-teardown cycles
(`dpwise.train.engine.train` on a small transformer, a fresh process group per cycle), first in the
order dpwise used before (destroy the process group, then free the DDP wrapper), then in
dpwise's order (engine.train). A cycle that does not finish within 60 s is a hang; it ends that
try, whose stacks go to --log.
"""

from __future__ import annotations

import argparse
import faulthandler
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
WORKLOADS = {
    # GPT-2 from a transformers config (2 blocks, width 128), token ids → 10 classes
    "gpt2": ["--model", "tinygpt:model", "--data", "tinygpt:data"],
    # dpwise's built-in pre-norm transformer encoder, 4 layers, width 256
    "transformer": ["--model", "transformer", "--model-arg", "layers=4", "--model-arg", "dim=256"],
}
WATCHDOG_MARK = "teardown did not finish"


def _busy() -> None:
    while True:
        pass


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "LOCAL_"))}
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    paths = [str(ROOT / "src"), str(FIXTURES), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _dump_stacks(pid: int) -> str:
    """Stacks of a hung process tree when py-spy is on PATH (not a dpwise dependency)."""
    spy = shutil.which("py-spy")
    if spy is None:
        return ""
    out = subprocess.run(
        ["pgrep", "-g", str(pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    dumps = []
    for child in out:
        res = subprocess.run(
            [spy, "dump", "--native", "--pid", child], capture_output=True, text=True, check=False
        )
        dumps.append(f"--- pid {child}\n{res.stdout}{res.stderr}")
    return "\n".join(dumps)


def one_run(args: argparse.Namespace, out: Path) -> tuple[str, float, str]:
    """('ok' | 'hung' | 'failed', seconds, detail)."""
    cmd = [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nproc", "2"]
    cmd += [*WORKLOADS[args.workload], "--batch-size", str(args.batch_size)]
    cmd += ["--epochs", "1", "--max-steps", str(args.steps), "--out", str(out), "--quiet"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        stacks = _dump_stacks(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hung", time.perf_counter() - start, stacks
    seconds = time.perf_counter() - start
    if WATCHDOG_MARK in err:
        return "hung", seconds, err[-4000:]
    if proc.returncode != 0 or not (out / "final.pt").exists():
        return "failed", seconds, f"exit {proc.returncode}\n{err[-4000:]}"
    return "ok", seconds, ""


# -- the in-process cycles --------------------------------------------------------------------
CYCLE_LIMIT_S = 60.0


def _cycle(order: str, port: int) -> None:
    """One train + teardown in this worker, on a fresh process group at ``port``."""
    import torch.distributed as dist

    from dpwise.infra.hardware import Hardware
    from dpwise.launch.env import DistEnv
    from dpwise.strategies import make_strategy
    from dpwise.train import engine
    from dpwise.train.config import TrainConfig
    from dpwise.train.plan import resolve
    from dpwise.workload.spec import resolve_workload

    os.environ["MASTER_PORT"] = str(port)
    args = {"layers": 2, "dim": 64}
    cfg = TrainConfig(model="transformer", model_args=args, strategy="ddp", max_steps=1,
                      batch_size=16, threads=1, quiet=True)  # fmt: skip
    env = DistEnv.from_environ()
    plan = resolve(cfg, Hardware.detect(), env)
    workload = resolve_workload(cfg.model, cfg.model_args, cfg.data, cfg.data_args)
    strategy = make_strategy(plan.strategy, env)
    if order == "dpwise":
        engine.train(plan, strategy, workload)
        return
    strategy.setup()  # the order before the fix: the group goes first, the wrapper after
    loop = engine.Loop(plan, strategy, workload)
    loop.run()
    dist.destroy_process_group()
    del loop


def _cycles_worker(rank: int, order: str, cycles: int, base_port: int, log: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", RANK=str(rank), LOCAL_RANK=str(rank))
    os.environ.update(WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    with open(log, "a") as stacks, open(f"{log}.done", "a") as done:
        for i in range(cycles):
            faulthandler.dump_traceback_later(CYCLE_LIMIT_S, exit=True, file=stacks)
            _cycle(order, base_port + i)
            faulthandler.cancel_dump_traceback_later()
            if rank == 0:
                done.write(f"{i}\n")
                done.flush()


def cycles_try(order: str, cycles: int, base_port: int, log: Path) -> int:
    """Cycles completed before a hang (``cycles`` when none hung)."""
    import torch.multiprocessing as mp

    done = Path(f"{log}.done")
    done.write_text("")
    with log.open("a") as stacks:
        stacks.write(f"=== {order}, ports from {base_port}\n")
    try:
        mp.spawn(_cycles_worker, args=(order, cycles, base_port, str(log)), nprocs=2)
    except mp.ProcessExitedException:
        return len(done.read_text().splitlines())
    return cycles


def main_cycles(args: argparse.Namespace) -> None:
    log = args.log or Path(tempfile.mkstemp(suffix=".txt")[1])
    port = 21000
    for order in ("destroy-first", "dpwise"):
        results = []
        for _ in range(args.tries):
            results.append(cycles_try(order, args.cycles, port, log))
            port += args.cycles
        hung = [r for r in results if r < args.cycles]
        print(f"{order:>13}: {len(hung)} of {args.tries} tries hung "
              f"(cycles before the hang: {hung or '-'}); {args.cycles} cycles per try")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="gpt2")
    p.add_argument("--steps", type=int, default=4, help="optimizer steps per run")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--timeout", type=float, default=180.0, help="seconds before a run is hung")
    p.add_argument("--load", type=int, default=0, help="busy-loop processes during the loop")
    p.add_argument("--log", type=Path, help="file for the stacks / errors of bad runs")
    p.add_argument("--cycles", type=int, help="in-process mode: train+teardown cycles per try")
    p.add_argument("--tries", type=int, default=3, help="in-process mode: tries per order")
    args = p.parse_args()
    if args.cycles:
        sys.path.insert(0, str(ROOT / "src"))
        main_cycles(args)
        return
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    counts, seconds = {"ok": 0, "hung": 0, "failed": 0}, []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                status, wall, detail = one_run(args, Path(tmp) / f"run{i}")
                counts[status] += 1
                seconds.append(wall)
                print(f"run {i + 1}/{args.runs}: {status} {wall:.1f} s", flush=True)
                if detail and args.log is not None:
                    with args.log.open("a") as log:
                        log.write(f"=== run {i + 1}: {status}\n{detail}\n")
    finally:
        for hog in hogs:
            hog.terminate()
    load = f", load {args.load} busy process(es)" if args.load else ""
    print(
        f"{args.runs} runs: {counts['hung']} hung, {counts['failed']} failed, "
        f"median {statistics.median(seconds):.1f} s ({args.workload}{load})"
    )


if __name__ == "__main__":
    main()

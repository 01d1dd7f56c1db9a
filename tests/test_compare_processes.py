"""compare runs each configuration in its own process, taking turns; failures stop them all."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import child_env, descendants, run_cli
from dpwise.compare.matrix import RunSpec
from dpwise.compare.runner import rounds

SMALL = ["--epochs", "2", "--repeats", "2", "--quiet"]
TINY = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]


def _spec(name: str) -> RunSpec:
    return RunSpec(name, name, "single", 1, "cpu")


def test_turns_interleave_the_runs_round_by_round_and_rotate():
    specs = [_spec(n) for n in ("a", "b", "c")]
    order = [(r, s.id) for r, s in rounds(specs, 4)]
    assert order[:6] == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a")]
    assert [s for _, s in order].count("a") == 4 and len(order) == 12


@pytest.mark.slow
def test_a_factory_error_is_one_line_exit_2_and_leaves_no_out(tmp_path, run_here):
    out = tmp_path / "new" / "report"
    proc = run_here(
        "compare", *SMALL, "--model", "userpkg:not_a_module", "--data", "userpkg:tiny_data",
        "--batch-size", "8", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "not_a_module" in proc.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_a_crashing_run_stops_every_run_process(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    proc = run_cli(
        "compare", *SMALL, "--model", "userpkg:exploding_model", "--data", "userpkg:tiny_data",
        "--batch-size", "8", "--out", str(tmp_path / "out"),
        env={"DPWISE_TEST_PIDS": str(pids)},
    )  # fmt: skip
    assert proc.returncode == 1
    assert "forward exploded on rank 1" in proc.stderr and "ddp × 2 run failed" in proc.stderr
    started = [int(p.stem) for p in pids.glob("*.pid")]
    assert len(started) >= 4  # single, dp, ddp × 1 and both ranks of ddp × 2 built the model
    assert not [pid for pid in started if os.path.exists(f"/proc/{pid}")]
    assert not (tmp_path / "out").exists(), "a failed compare left a half-written --out"


@pytest.mark.slow
def test_max_steps_and_threads_apply_to_every_run_each_in_its_own_process(tmp_path, run_here):
    """The command runs in this process: no run is it."""
    proc = run_here(
        "compare", *SMALL, *TINY, "--max-steps", "3", "--threads", "1", "--out", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["workload"]["max_steps"] == 3 and results["workload"]["threads"] == 1
    runs = results["runs"]
    assert [len(r["losses"]) for r in runs] == [3] * len(runs)
    assert {r["threads_per_process"] for r in runs} == {1}
    pids = [pid for r in runs for pid in r["pids"]]
    assert len(set(pids)) == len(pids) == 5 and os.getpid() not in pids
    assert len(runs[0]["samples_per_s"]["values"]) == 2


@pytest.mark.slow
def test_stopping_compare_stops_every_run_process(tmp_path):
    # the tiny workload: the claim is about the processes, not what they train
    cmd = [sys.executable, "-m", "dpwise", "compare", "--repeats", "10000", "--quiet", *TINY]
    out = tmp_path / "out"
    proc = subprocess.Popen([*cmd, "--out", str(out)], env=child_env(), text=True,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(descendants(proc.pid)) < 6 and time.monotonic() < deadline:
            time.sleep(0.5)  # single, dp, ddp × 1, the ddp × 2 launcher and its two workers
        started = descendants(proc.pid)
        assert len(started) >= 6
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143  # 128 + SIGTERM, as a shell reports it
        assert not out.exists(), "a stopped compare left a half-written --out"
    finally:
        proc.kill()
    deadline = time.monotonic() + 30
    while [p for p in started if os.path.exists(f"/proc/{p}")] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [(p, _name(p)) for p in started if os.path.exists(f"/proc/{p}")]


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def test_run_processes_fork_from_a_server_that_preloaded_torch():
    """Each run process would otherwise import torch and torch._dynamo itself (seconds each)."""
    from dpwise.compare.settings import RUN_MODULE
    from dpwise.launch import forking

    ctx = forking.context(RUN_MODULE)
    assert ctx.get_start_method() == "forkserver"
    assert {"torch", "torch._dynamo"} <= set(forking.PRELOAD)


def test_the_fork_server_starts_before_the_command_imports_torch():
    import subprocess
    import sys

    code = (
        "import sys, dpwise.cli, dpwise.commands.compare, dpwise.launch.forking as f; "
        "assert 'torch' not in sys.modules, 'torch imported too early'; "
        "f.ensure_running(); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


FRAGMENTED_HEAP = """
import sys, torch
from dpwise.measure import memory
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
if sys.argv[1] == "on":
    memory.return_large_blocks()
x = torch.ones(2**20); del x  # a freed 4 MiB block raises glibc's own mmap threshold
big, small = [], []
for _ in range(100):
    big.append(torch.ones(2**19))  # 2 MiB each, touched
    small.append(bytearray(4096))  # a small record on top of each, as the profiler leaves
before = rss(); del big
print((before - rss()) / 2**20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_probe_makes_freed_activations_go_back_to_the_system():
    """Without it the profiler's small records pin freed blocks (probe RSS 2x training's)."""
    returned = {}
    for mode in ("off", "on"):
        done = subprocess.run(
            [sys.executable, "-c", FRAGMENTED_HEAP, mode],
            capture_output=True, text=True, timeout=120, env=child_env(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        returned[mode] = float(done.stdout.split()[-1])
    assert returned["off"] < 50  # MiB: the heap keeps the freed blocks
    assert returned["on"] > 150  # of the 200 MiB freed

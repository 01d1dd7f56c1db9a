"""--max-restarts: kill -9 a worker mid-run; the restarted group resumes and ends where an
uninterrupted run ends (the parameters within 1e-6, metrics.json holding the whole run)."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import DDP_REFERENCE, child_env, load_state, max_abs_diff

RUN = [*DDP_REFERENCE, "--quiet", "--checkpoint-every", "5"]
RESUMED = re.compile(r"^restart 1: resuming from step (\d+) of checkpoint\.pt$", re.M)


def _workers(launcher: int) -> list[int]:
    """The launcher's worker processes: the children of its fork server (dpwise.launch.forking;
    they carry the server's command line), or its own children where it spawns them; never the
    server itself or multiprocessing's resource tracker."""
    parents, commands = {}, {}
    for proc in Path("/proc").iterdir():
        try:
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            commands[int(proc.name)] = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
    children = {pid for pid, parent in parents.items() if parent == launcher}
    servers = {pid for pid in children if b"forkserver" in commands.get(pid, b"")}
    spawned = {pid for pid in children - servers if b"resource_tracker" not in commands[pid]}
    return sorted(spawned | {pid for pid, parent in parents.items() if parent in servers})


def _checkpoint_id(path: Path) -> tuple[int, int] | None:
    """Which checkpoint ``path`` is: each is a new file that replaces the last (atomically)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _killed_run(
    out: Path, checkpoints: int, delay: float
) -> tuple[subprocess.CompletedProcess, int]:
    """Start a run; `delay` s after its `checkpoints`-th checkpoint, kill -9 a random worker.

    Counted in checkpoints (every 5 of the 78 steps), not in seconds: on any machine the kill
    lands while the workers train, at most 60 steps in, however fast they run."""
    args = [sys.executable, "-m", "dpwise", *RUN, "--max-restarts", "1", "--out", str(out)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
    )
    deadline = time.monotonic() + 120
    seen, last = 0, None
    while seen < checkpoints and proc.poll() is None and time.monotonic() < deadline:
        current = _checkpoint_id(out / "checkpoint.pt")
        if current is not None and current != last:
            seen, last = seen + 1, current
        time.sleep(0.005)
    time.sleep(delay)
    victims = [pid for pid in _workers(proc.pid) if _alive(pid)]
    victim = random.choice(victims) if victims else 0
    if victim:
        os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr), victim


def _alive(pid: int) -> bool:
    """Not a zombie: a worker that has exited (not yet reaped) cannot be killed."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_a_killed_worker_is_restarted_and_the_run_resumes_to_the_same_parameters(
    tmp_path, ddp_reference
):
    """The killed runs take checkpoints; the uninterrupted run they must end at takes none
    (conftest.ddp_reference: the same run without --checkpoint-every)."""
    straight, _ = ddp_reference
    expected = load_state(straight / "final.pt")
    losses = json.loads((straight / "metrics.json").read_text())["losses"]
    for trial in range(1):  # each run of the suite draws its own kill point
        out = tmp_path / f"killed{trial}"
        checkpoints, delay = random.randint(1, 12), random.uniform(0.0, 0.05)
        proc, victim = _killed_run(out, checkpoints, delay)
        assert victim, "no worker to kill: the run ended before its checkpoint"
        assert proc.returncode == 0, proc.stderr[-3000:]
        resumed = RESUMED.findall(proc.stderr)
        assert len(resumed) == 1 and int(resumed[0]) >= 5, proc.stderr[-3000:]
        assert max_abs_diff(expected, load_state(out / "final.pt")) <= 1e-6
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["restarts"] == 1 and metrics["resumed_at_step"] == int(resumed[0])
        assert metrics["losses"] == pytest.approx(losses, abs=1e-6)
        assert [e["steps"] for e in metrics["epochs"]] == [39, 39]
        assert not list(out.glob(".*.tmp"))  # a write the kill interrupted left nothing


@pytest.mark.parametrize(("restarts", "fresh"), [(1, "1"), (0, None)])
def test_restartable_launches_give_each_attempt_its_own_store(monkeypatch, restarts, fresh):
    """The shared agent store kept a dead attempt's keys (pytorch#135712): opt out of it."""
    from torch.distributed import launcher

    from dpwise.infra.hardware import Hardware
    from dpwise.launch.elastic import launch
    from dpwise.launch.env import DistEnv
    from dpwise.train.config import TrainConfig
    from dpwise.train.plan import resolve

    seen = []
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    monkeypatch.setattr(
        launcher.api,
        "elastic_launch",
        lambda cfg, fn: (
            lambda *a: seen.append(os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE"))
        ),
    )
    cfg = TrainConfig(strategy="ddp", nproc=2, max_restarts=restarts)
    launch(resolve(cfg, Hardware.detect(), DistEnv()).launch_settings, print)
    assert seen == [fresh] and "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in os.environ


def test_static_rendezvous_refuses_restarts():
    from dpwise.errors import DpwiseError
    from dpwise.train.config import TrainConfig

    with pytest.raises(DpwiseError, match="--max-restarts 1 needs --rdzv-backend c10d"):
        TrainConfig(strategy="ddp", rdzv_backend="static", max_restarts=1, rdzv_endpoint="h:1")


def test_a_restart_without_a_checkpoint_of_this_launch_starts_again(tmp_path, userpkg):
    """A checkpoint another launch left in --out is not this run's: step 0 (or --resume's)."""
    from dpwise.launch.env import DistEnv
    from dpwise.train.config import TrainConfig
    from dpwise.train.restart import attempt_for
    from helpers_train import train_here

    tiny = {"model": "userpkg:tiny_model", "data": "userpkg:tiny_data", "batch_size": 8}
    train_here(tmp_path, epochs=1, checkpoint_every=4, **tiny)  # run id None: another launch
    cfg = TrainConfig(out=tmp_path, epochs=2, checkpoint_every=4, **tiny)
    env = DistEnv(run_id="this-launch", restart_count=1, under_launcher=True)
    first = attempt_for(cfg, env)
    assert first.state is None and first.notice == (
        "restart 1: no checkpoint yet; starting again from step 0"
    )
    resumed = attempt_for(replace(cfg, resume=tmp_path / "checkpoint.pt"), env)
    assert resumed.notice == "restart 1: resuming from step 8 of checkpoint.pt"

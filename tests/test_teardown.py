"""DDP teardown: the wrapper (its Reducer) is gone and no collective is outstanding before the
process group is destroyed, outputs are written before teardown, and a stuck teardown is reported.

The hang this guards against: a DDP wrapper outliving destroy_process_group makes its Reducer's
destructor (run with the GIL held) drop the last reference to ProcessGroupGloo, whose destructor
joins gloo's threads while one of them waits for the GIL (pytorch#56297).
"""

from __future__ import annotations

import gc
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref

import pytest
import torch
import torch.distributed as dist

from conftest import child_env, free_port
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies import ddp as ddp_module
from dpwise.strategies import make_strategy
from dpwise.strategies.ddp_guard import GuardedDDP
from dpwise.train import engine
from dpwise.train.config import TrainConfig
from dpwise.train.plan import resolve
from dpwise.workload.spec import resolve_workload


@pytest.fixture
def one_rank(monkeypatch, unused_port):
    """A one-process gloo group that the strategy itself creates (and must destroy)."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(unused_port), "RANK": "0"}
    for key, value in {**env, "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture
def unused_port():
    return free_port()


def run_cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """`python -m dpwise ARGS`; on timeout the whole process group (workers too) is killed."""
    cmd = [sys.executable, "-m", "dpwise", *args]
    with subprocess.Popen(
        cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture
def recorder(monkeypatch):
    """Records the order of collectives and teardown, and which DDP wrappers live at destroy."""
    calls: list[str] = []
    wrappers: list[weakref.ref] = []
    at_destroy: dict[str, object] = {}

    class Recorded(GuardedDDP):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            wrappers.append(weakref.ref(self))

    def spy(name):
        real = getattr(dist, name)

        def call(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)

        return call

    real_destroy = dist.destroy_process_group

    def destroy(*args, **kwargs):
        calls.append("destroy_process_group")
        gc.collect()  # what is still alive now is referenced, not merely uncollected
        at_destroy["alive"] = [r() for r in wrappers if r() is not None]
        at_destroy["reducers"] = [getattr(w, "reducer", None) for w in at_destroy["alive"]]
        return real_destroy(*args, **kwargs)

    monkeypatch.setattr(ddp_module, "GuardedDDP", Recorded)
    for name in ("all_gather_object", "all_reduce", "barrier"):
        monkeypatch.setattr(dist, name, spy(name))
    monkeypatch.setattr(dist, "destroy_process_group", destroy)
    return calls, wrappers, at_destroy


def _train_ddp(**overrides):
    cfg = TrainConfig(strategy="ddp", epochs=1, batch_size=64, quiet=True, **overrides)
    env = DistEnv.from_environ()
    plan = resolve(cfg, Hardware.detect(), env)
    workload = resolve_workload(cfg.model, cfg.model_args, cfg.data, cfg.data_args)
    return engine.train(plan, make_strategy(plan.strategy, env), workload)


def test_wrapper_is_freed_and_work_completed_before_the_group_is_destroyed(one_rank, recorder):
    calls, wrappers, at_destroy = recorder
    _train_ddp(max_steps=2)
    assert len(wrappers) == 1
    assert calls[-1] == "destroy_process_group"
    assert at_destroy["alive"] == [], "the DDP wrapper (and its Reducer) outlived the group"
    # the last collective before destroy is a barrier: every all_gather has completed
    before = calls[:-1]
    assert "all_gather_object" in before
    assert before[-1] == "barrier"


def test_a_wrapper_still_held_loses_its_reducer_before_destroy(one_rank, recorder):
    _, _, at_destroy = recorder
    cfg = TrainConfig(strategy="ddp", quiet=True)
    env = DistEnv.from_environ()
    strategy = make_strategy(resolve(cfg, Hardware.detect(), env).strategy, env)
    strategy.setup()
    held = strategy.wrap(torch.nn.Linear(4, 2))  # e.g. a traceback still references the loop
    held(torch.randn(8, 4)).sum().backward()
    strategy.teardown()
    assert at_destroy["alive"] == [held]
    assert at_destroy["reducers"] == [None], "the Reducer would destroy the group under the GIL"
    assert not dist.is_initialized()


def test_single_and_dp_release_and_teardown_are_no_ops():
    for name in ("single", "dp"):
        cfg = TrainConfig(strategy=name, quiet=True)
        strategy = make_strategy(resolve(cfg, Hardware.detect(), DistEnv()).strategy, DistEnv())
        model = torch.nn.Linear(4, 2)
        wrapped = strategy.wrap(model)
        strategy.release(wrapped)
        strategy.teardown()
        assert strategy.unwrap(wrapped) is model
        assert not dist.is_initialized()


@pytest.mark.slow
def test_stuck_teardown_is_reported_after_outputs_are_written(tmp_path):
    """A teardown that never returns: the worker's watchdog stops it, the parent says so."""
    out = tmp_path / "run"
    res = run_cli(
        *("train", "--strategy", "ddp", "--nproc", "2", "--epochs", "1", "--max-steps", "2"),
        *("--model", "stuckteardown:model", "--data", "stuckteardown:data", "--batch-size", "16"),
        *("--out", str(out), "--quiet"),
        timeout=240,
    )
    assert res.returncode == 1, res.stderr
    assert "teardown did not finish within 2 s" in res.stderr
    assert "teardown" in res.stderr and "Timeout (" in res.stderr  # the stuck stacks
    assert (out / "final.pt").is_file() and (out / "metrics.json").is_file()


# Five ddp launches from one `dpwise.cli.main` process, each launch's two workers fresh ones (the
# hang is in a worker's teardown); one line per launch: its index and exit code.
REPEATED = """
import sys
from dpwise.cli import main
for i, out in enumerate(sys.argv[1:]):
    args = ["train", "--strategy", "ddp", "--nproc", "2", "--epochs", "1", "--model", "transformer"]
    args += ["--model-arg", "layers=4", "--model-arg", "dim=256", "--max-steps", "2"]
    code = main([*args, "--batch-size", "32", "--out", out, "--quiet"])
    print(i, code, flush=True)
"""


def _read(file) -> str:
    file.seek(0)
    return file.read()


RUNS = 3  # each run of the suite; bench/ddp_teardown_stress.py runs many


@pytest.mark.slow
def test_repeated_ddp_runs_of_a_transformer_finish(tmp_path):
    """A small version of bench/ddp_teardown_stress.py: each run must end, with its outputs."""
    outs = [tmp_path / f"run{i}" for i in range(RUNS)]
    cmd = [sys.executable, "-c", REPEATED, *map(str, outs)]
    with (tmp_path / "stderr").open("w+") as err, subprocess.Popen(
        cmd, env=child_env(), stdout=subprocess.PIPE, stderr=err, text=True,
        start_new_session=True,
    ) as proc:  # fmt: skip
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
        ended = []
        try:
            for i in range(RUNS):
                ended.append(lines.get(timeout=180).split())
                assert ended[-1] == [str(i), "0"], (ended, _read(err))
        except queue.Empty:
            pytest.fail(f"run {len(ended) + 1} of {RUNS} hung")
        finally:
            if proc.poll() is None and len(ended) < RUNS:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == 0, _read(err)
    for folder in outs:
        assert (folder / "final.pt").is_file()


class _EveryTurnNow:
    """A turn client that grants every turn at once (compare's parent is not there)."""

    def ready(self) -> None:
        pass

    def wait(self, what: str) -> None:
        pass

    def done(self, what: str, payload: str = "") -> None:
        self.last = payload


@pytest.mark.slow  # in one process, but a full compare run with its profiled probe
def test_compare_ddp_run_frees_its_wrappers_before_destroy(tmp_path, recorder):
    """compare's ddp × 1 run (a one-member group in its own process) tears down in order."""
    from dpwise.compare.matrix import RunSpec
    from dpwise.compare.settings import CompareConfig
    from dpwise.compare.worker import serve

    _, wrappers, at_destroy = recorder
    cfg = CompareConfig(
        epochs=2, repeats=1, profile_steps=1, batch_size=64, data_args={"samples": 256},
        out=tmp_path, quiet=True,
    )  # fmt: skip
    client = _EveryTurnNow()
    serve(RunSpec("ddp-1", "ddp × 1", "ddp", 1, "cpu"), cfg, client)
    assert client.last and len(wrappers) >= 2  # the timed repeat and the profiled probe
    assert at_destroy["alive"] == []
    assert not dist.is_initialized()

"""Every train setting × --resume: a run cut at a step and resumed ends where the uninterrupted
run ends (1e-6), whatever knob it trains with; a knob that changes the trajectory is compared on
--resume and a change refused in one line; a live run's --out is named by its pid first.

The walk trains in two real workers (torchrun's variables, gloo), every case in one process group
(resume_walk.py), with dpwise's own strategies, loop and checkpoints: PowerSGD's error feedback
is each rank's own, ZeRO-1's and fsdp's optimizer state are sharded over both.
"""

from __future__ import annotations

import json
import time
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import resume_walk
import torch
from live_run import LiveRun

from conftest import free_port, load_state, max_abs_diff
from dpwise.errors import DpwiseError
from dpwise.train import checkpoint
from dpwise.train.config import TrainConfig

SIMPLE = {"model_args": {"in_features": 16, "hidden": 16, "classes": 4},
          "data_args": {"samples": 160, "in_features": 16, "classes": 4}}  # fmt: skip
TRANSFORMER = {
    "model": "transformer",
    "model_args": {"layers": 2, "dim": 16, "heads": 2, "vocab": 64, "seq_len": 8, "classes": 4,
                   "dropout": 0.1},  # random in every step: the generators must resume too
    "data_args": {"samples": 160, "vocab": 64, "seq_len": 8, "classes": 4},
}  # fmt: skip
USER = {"model": "userpkg:tiny_model", "model_args": {}, "data": "userpkg:tiny_data",
        "data_args": {"samples": 160}}  # fmt: skip
BASE = {"strategy": "ddp", "batch_size": 32, "epochs": 2, **SIMPLE}  # 5 steps an epoch
CUT = 4  # mid-epoch, after PowerSGD's two plain steps
ADAMW = {"optimizer": "adamw", "lr": 1e-3}
FSDP = {"strategy": "fsdp", **TRANSFORMER, **ADAMW}
VIEWS = {"static_graph": True, "gradient_as_bucket_view": True}


def _case(name: str, cut: int = CUT, later: dict | None = None, **settings) -> dict:
    return {"name": name, "settings": {**BASE, **settings}, "cut": cut,
            "resume_with": later or {}}  # fmt: skip


# Each group is one launch of the walk (a test); a case trains three times (whole, cut, resumed).
WALKS = {
    "optimizer": [
        _case("base"),
        _case("cut at the epoch's end", cut=5),
        _case("max_steps", max_steps=8),
        _case("epochs", epochs=3, cut=7),
        _case("lr", lr=0.05),
        _case("seed", seed=3),
        _case("momentum", momentum=0.9),
        _case("adamw, weight_decay", weight_decay=0.01, **ADAMW),
    ],
    "workload": [
        _case("transformer with dropout", **TRANSFORMER),
        _case("user model and data", **USER),
        _case("loss", loss="cross-entropy"),
        _case("batch_size", batch_size=16),
        _case("accum_steps", accum_steps=2),
        _case("bf16", precision="bf16"),
        _case("fp16 (GradScaler)", precision="fp16"),
    ],
    "ddp": [
        _case("find_unused_parameters", find_unused_parameters=True),
        _case("static_graph, gradient_as_bucket_view", **VIEWS),
        _case("bucket_cap_mb (several buckets)", bucket_cap_mb=0.001),
        _case("zero1 (adamw)", zero1=True, **ADAMW),
        _case("comm_hook fp16", comm_hook="fp16"),
        _case("zero1 → plain", later={"zero1": False}, zero1=True, **ADAMW),
        _case("plain → zero1", later={"zero1": True}, **ADAMW),
    ],
    "powersgd": [
        _case("comm_hook powersgd", comm_hook="powersgd"),
        _case("powersgd, transformer", comm_hook="powersgd", **TRANSFORMER),
        _case("powersgd, accum_steps", comm_hook="powersgd", accum_steps=2),
        _case("powersgd, static_graph, bucket view", comm_hook="powersgd", **VIEWS),
        _case("powersgd, bucket view added", later=VIEWS, comm_hook="powersgd"),
    ],
    "fsdp": [
        _case("fsdp (adamw)", **FSDP),
        _case("shard_units model", shard_units="model", **FSDP),
        _case("no reshard_after_forward", reshard_after_forward=False, **FSDP),
        # knobs that do not change the trajectory, changed between the runs
        _case("bucket_cap_mb changed", later={"bucket_cap_mb": 0.001}),
        _case("ddp → fsdp", later={"strategy": "fsdp"}, **TRANSFORMER, **ADAMW),
    ],
}
# The settings no case walks, and why. Every other TrainConfig setting is given a value other
# than its default by some case (test_the_walk_covers_every_setting).
NOT_WALKED = {
    **dict.fromkeys(("nproc", "nnodes", "node_rank", "min_nnodes", "rdzv_endpoint",
                     "rdzv_backend", "rdzv_id", "cluster", "dry_run", "timeout"),
                    "where and how the workers start: the walk's two workers"),
    "max_restarts": "a restart resumes through the same checkpoint (test_restart.py)",
    "device": "CPU here; CUDA in the GPU tests",
    "backend": "gloo here; NCCL in the GPU tests",
    "threads": "one thread per worker here",
    **dict.fromkeys(("out", "checkpoint_every", "resume"), "the walk's own cut and resume"),
    "overwrite": "a fresh --out per case",
    "quiet": "the walk prints nothing",
    "compile": "seconds of compilation per training: test_compiled_run_resumes walks it alone",
}  # fmt: skip
TOLERANCE = 1e-6


def _walk(tmp_path: Path, cases: list[dict], timeout: float = 240) -> dict:
    """The walk in two workers forked from dpwise's fork server, as dpwise starts its own, with
    torchrun's variables set, without torchrun's agent (a third process, which the walk does
    not test)."""
    from dpwise.launch import forking

    (tmp_path / "cases.json").write_text(json.dumps(cases))
    result = tmp_path / "result.json"
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
              "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    logs = [tmp_path / f"worker{r}.err" for r in range(2)]
    ctx = forking.context()
    forking.ensure_running()
    workers = [
        ctx.Process(target=forking.AsParent(resume_walk.worker,
                                            {**common, "RANK": str(r), "LOCAL_RANK": str(r)}),
                    args=(str(tmp_path / "cases.json"), str(result), str(log)))
        for r, log in enumerate(logs)
    ]  # fmt: skip
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    try:
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()
            w.join()
    codes = [w.exitcode for w in workers]
    text = [log.read_text()[-3000:] if log.exists() else "" for log in logs]
    assert codes == [0, 0] and result.exists(), (codes, text)
    return json.loads(result.read_text())


def _default(name: str):
    f = next(f for f in fields(TrainConfig) if f.name == name)
    return f.default_factory() if f.default is MISSING else f.default


def test_the_walk_covers_every_setting():
    """A setting added to TrainConfig fails here until a case walks it or NOT_WALKED says why."""
    names = {f.name for f in fields(TrainConfig)}
    walked = {
        key
        for cases in WALKS.values()
        for case in cases
        for settings in (case["settings"], case["resume_with"])
        for key, value in settings.items()
        if value != _default(key)
    }
    assert not set(NOT_WALKED) - names, "NOT_WALKED names no setting"
    assert names - set(NOT_WALKED) - walked == set(), "settings no case walks"


def test_every_setting_is_in_the_fingerprint_or_said_not_to_change_the_trajectory():
    names = {f.name for f in fields(TrainConfig)}
    assert set(checkpoint.SAME_TRAJECTORY) <= names, "SAME_TRAJECTORY names no setting"
    assert set(checkpoint.FINGERPRINT_KEYS) == names - set(checkpoint.SAME_TRAJECTORY)
    # the knobs that change the arithmetic of a step are compared on --resume
    assert {"comm_hook", "loss", "precision", "accum_steps", "optimizer"} <= set(
        checkpoint.FINGERPRINT_KEYS
    )


@pytest.mark.slow
@pytest.mark.parametrize("group", list(WALKS))
def test_every_setting_resumes_where_the_uninterrupted_run_ends(tmp_path, group, userpkg):
    results = _walk(tmp_path, WALKS[group])
    print(json.dumps(results, indent=1))
    far = {n: d for n, d in results.items() if isinstance(d, str) or not d <= TOLERANCE}
    assert not far, far
    assert set(results) == {case["name"] for case in WALKS[group]}


# -- the PowerSGD run, through the command -------------------------------------------
# its 32 steps (16 an epoch), on batches of 32 rows of 512 (the issue's: 256 of 4096): the same
# steps and cut at an eighth of the arithmetic (its error feedback zeroed: 3e-3 apart)
PSGD = ["train", "--strategy", "ddp", "--nproc", "2", "--epochs", "2", "--checkpoint-every", "5",
        "--comm-hook", "powersgd", "--data-arg", "samples=512", "--batch-size", "32",
        "--quiet"]  # fmt: skip


@pytest.mark.slow
def test_a_resumed_powersgd_run_ends_where_the_uninterrupted_run_does(tmp_path, run_here):
    """Stopped at step 20 of 32 and resumed: PowerSGD's step, generator, warm-start matrices and
    each rank's error feedback come back from checkpoint.pt (main: 1e-3 apart)."""
    for args in (["--out", str(tmp_path / "whole")],
                 ["--max-steps", "20", "--out", str(tmp_path / "cut")],
                 ["--resume", "--out", str(tmp_path / "cut")]):  # fmt: skip
        proc = run_here(*PSGD, *args)
        assert proc.returncode == 0, proc.stderr
    diff = max_abs_diff(load_state(tmp_path / "whole" / "final.pt"),
                        load_state(tmp_path / "cut" / "final.pt"))  # fmt: skip
    print(f"PowerSGD resumed vs uninterrupted: max |difference| {diff:.3g}")
    assert diff <= TOLERANCE


TINY = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]
TINY_SETTINGS = {"model": "userpkg:tiny_model", "data": "userpkg:tiny_data", "batch_size": 8}


@pytest.fixture
def saved(tmp_path, userpkg):
    """A tiny single run's checkpoint (step 4 of 16)."""
    from helpers_train import train_here

    train_here(tmp_path, epochs=2, max_steps=4, checkpoint_every=4, **TINY_SETTINGS)
    return tmp_path / "checkpoint.pt"


def _edit(path: Path, change) -> None:
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def _other(key: str, value):
    """A value of setting ``key`` other than ``value``."""
    others = {"model": "userpkg:other", "model_args": {"width": 9}, "data": "userpkg:other",
              "data_args": {"samples": 9}, "loss": "mse", "optimizer": "adamw",
              "precision": "bf16", "comm_hook": "powersgd"}  # fmt: skip
    return others[key] if key in others else value + 1


def test_every_fingerprinted_setting_changed_on_resume_is_refused_naming_it(saved):
    expected = checkpoint.fingerprint(TrainConfig(**TINY_SETTINGS).to_dict())
    for key in checkpoint.FINGERPRINT_KEYS:
        changed = {**expected, key: _other(key, expected[key])}
        with pytest.raises(DpwiseError) as caught:
            checkpoint.load(saved, changed)
        message = str(caught.value)
        assert f"({key} " in message and "\n" not in message, message


def _refused(run_here, *args: str) -> str:
    proc = run_here("train", "--quiet", *TINY, "--epochs", "2", *args)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    return err


def test_a_knob_changed_between_runs_is_one_line_naming_it(saved, run_here):
    _edit(saved, lambda s: s["fingerprint"].update(comm_hook="powersgd", loss="mse"))
    err = _refused(run_here, "--out", str(saved.parent), "--resume")
    assert "comm_hook 'powersgd' → 'none'" in err and "loss 'mse' → 'auto'" in err, err


def test_a_checkpoint_older_than_a_setting_resumes_only_with_its_default(saved, run_here):
    """Written before dpwise recorded --comm-hook and --loss: the defaults resume it, another
    value is refused naming the setting."""
    _edit(saved, lambda s: [s["fingerprint"].pop(k) for k in ("comm_hook", "loss")])
    err = _refused(run_here, "--out", str(saved.parent), "--resume", "--loss", "cross-entropy")
    assert "does not record loss" in err and "default loss 'auto'" in err, err
    proc = run_here("train", "--quiet", *TINY, "--epochs", "2", "--out", str(saved.parent),
                    "--resume")  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_powersgds_error_feedback_resumes_on_as_many_processes_only(saved, run_here):
    """Each process's error feedback is its own: a checkpoint of two resumes on two."""
    feedback = {"iter": 4, "params": {},
                "rng": {"keys": torch.zeros(624, dtype=torch.int64), "pos": 624, "has_gauss": 0,
                        "gauss": 0.0}}  # fmt: skip
    _edit(saved, lambda s: (s["fingerprint"].update(comm_hook="powersgd"),
                            s.update(hook=[feedback, feedback])))  # fmt: skip
    err = _refused(run_here, "--strategy", "ddp", "--nproc", "1", "--comm-hook", "powersgd",
                   "--out", str(saved.parent), "--resume")  # fmt: skip
    assert "PowerSGD error feedback of 2 processes, this run has 1" in err, err


def test_powersgd_on_gloo_with_find_unused_parameters_is_one_line_before_any_worker(
    tmp_path, run_here
):
    """gloo aborted in every such run ("Received data size doesn't match expected size")."""
    out = tmp_path / "out"
    proc = run_here("train", "--strategy", "ddp", "--nproc", "2", "--comm-hook", "powersgd",
                    "--find-unused-parameters", "--out", str(out))  # fmt: skip
    assert proc.returncode == 2 and "cannot take --find-unused-parameters" in proc.stderr
    assert proc.stderr.strip().count("\n") <= 1 and not out.exists()  # the data line, the error


# -- a live run's --out ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_train_into_a_live_runs_out_is_told_its_pid_first(tmp_path, run_here):
    out = tmp_path / "out"
    live = LiveRun(tmp_path / "tmp", "train", *TINY, "--epochs", "100000", "--checkpoint-every",
                   "1", "--quiet", "--out", str(out))  # fmt: skip
    try:
        live.wait_for(lambda: (out / "checkpoint.pt").exists(), 120, "checkpoint.pt")
        for extra in ([], ["--resume"]):
            proc = run_here("train", "--quiet", *TINY, "--epochs", "1", "--out", str(out), *extra)
            err = proc.stderr.strip()
            assert proc.returncode == 2 and "\n" not in err, err
            assert f"in use by another dpwise run (pid {live.proc.pid})" in err, err
            assert "--resume" not in err, err
        time.sleep(1)  # the refused runs left the live run alone: it goes on
        assert live.proc.poll() is None, live.stderr
    finally:
        live.kill()


@pytest.mark.slow
def test_compiled_run_resumes(tmp_path, userpkg, monkeypatch):
    """--compile, alone of the walk: its first training compiles for seconds on the CPU; the
    later ones, in this process, reuse the compiled code. One process: compile wraps the model
    before any strategy does. Inductor compiles in this process (its default, a pool of
    compile workers, spends ~40 s starting them on a busy 2-core machine; the code is the same)."""
    import torch._inductor.config as inductor

    from helpers_train import train_here

    monkeypatch.setattr(inductor, "compile_threads", 1)
    settings = {**SIMPLE, "batch_size": 32, "epochs": 2, "compile": True}
    whole, _ = train_here(tmp_path / "whole", **settings)
    out = tmp_path / "cut"
    train_here(out, max_steps=CUT, checkpoint_every=CUT, **settings)
    resumed, _ = train_here(out, resume=out / "checkpoint.pt", **settings)
    assert max_abs_diff(whole, resumed) <= TOLERANCE

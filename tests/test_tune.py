"""`dpwise tune`: the knobs and candidates, the decisions, the answer, bad input, and real
searches (two workers on gloo): results.json's contract, equivalence, Ctrl-C and --resume, a
worker killed while a candidate trains."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import child_env, run_cli
from dpwise.errors import DpwiseError
from dpwise.tune import results, space
from dpwise.tune.journal import Candidate
from dpwise.tune.space import TuneConfig, parse_budget

MiB = 2**20


def facts(**kw):
    base = dict(strategy="ddp", gradient_bytes=55 * MiB, backend="gloo", worlds=(2,),
                batch_size=256)  # fmt: skip
    return space.Facts(**{**base, **kw})


# -- the knobs and their candidates --------------------------------------------------------------
def test_ddp_candidates_on_gloo_say_why_each_left_out_is_left_out():
    found = {c.name: c for c in space.first_stage(facts())}
    assert found["comm_hook=bf16"].state == "skipped" and "NCCL" in found["comm_hook=bf16"].reason
    assert (
        found["comm_hook=fp16"].state == "skipped"
        and "--allow-lossy" in found["comm_hook=fp16"].reason
    )
    assert found["zero1"].state == "active" and found["static_graph"].state == "active"
    assert {"accum_steps=2", "accum_steps=4"} <= set(found)
    assert "compile" not in found  # only with --compile
    lossy = {c.name: c for c in space.first_stage(facts(allow_lossy=True, backend="nccl"))}
    assert all(lossy[f"comm_hook={h}"].state == "active" for h in ("fp16", "bf16", "powersgd"))


def test_bucket_sizes_sit_around_the_models_gradients():
    assert space.bucket_sizes(55 * MiB) == [5.0, 100.0, 13.75, 56.0]
    # a model whose gradients fit DDP's default bucket: only smaller buckets change anything
    assert space.bucket_sizes(2 * MiB) == [0.5]
    assert 41.0 in space.bucket_sizes(40 * MiB)  # one bucket: the default needs two


def test_splits_keep_every_micro_batch_divisible_by_the_world():
    assert space.splits(256, (2,)) == [2, 4]
    assert space.splits(12, (4,)) == []  # 6 and 3 rows do not split over 4 workers
    assert space.splits(24, (2, 4)) == [2]


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(knobs=("reshard_after_forward",)), "a knob of --strategy fsdp, not ddp"),
        (dict(knobs=("bucket_size",)), "not a knob of --strategy ddp; its knobs: bucket_cap_mb"),
        (dict(knobs=("static_graph",), varying="blocks.1"), "the graph is not static"),
        (dict(strategy="fsdp", knobs=("zero1",)), "a knob of --strategy ddp, not fsdp"),
    ],
)
def test_knobs_the_strategy_or_model_cannot_take_are_refused(kw, says):
    with pytest.raises(DpwiseError, match=r"^--knobs") as err:
        space.first_stage(facts(**kw))
    assert says in str(err.value)


def test_fsdp_knobs():
    names = [c.name for c in space.first_stage(facts(strategy="fsdp", compile=True))]
    assert names[:2] == ["reshard_after_forward=False", "shard_units=model"]
    assert "compile" in names and not any("bucket" in n for n in names)


# -- the decisions ---------------------------------------------------------------------------------
def cand(ratios, **kw):
    c = Candidate({"comm_hook": "fp16"}, **kw)
    c.pairs = [[r * 1.0, 1.0] for r in ratios]
    return c


def test_a_candidate_that_never_gains_is_pruned_after_its_first_rounds():
    c = cand([1.01, 0.97])
    results.after_round(c)
    assert c.state == "pruned" and "no gain in its first 2 rounds" in c.reason


def test_faster_needs_the_whole_interval_above_the_margin():
    fast = cand([1.6, 1.62, 1.58, 1.61, 1.65, 1.59])
    results.after_round(fast)
    v = results.verdict(fast)
    assert fast.state == "done" and v.outcome == "faster" and v.low == pytest.approx(1.58)
    close = cand([1.02, 1.2, 0.98, 1.1, 1.3, 1.01])
    results.after_round(close)
    assert results.verdict(close).outcome == "inconclusive"
    assert close.state == "active"  # its median is past the margin: more rounds, up to 12


def test_only_equivalent_or_allowed_lossy_candidates_are_recommended():
    fast = [1.6, 1.62, 1.58, 1.61, 1.65, 1.59]
    lossy = cand(fast, lossy=True)
    assert not results.eligible(lossy, allow_lossy=False, limit=None)
    assert results.eligible(lossy, allow_lossy=True, limit=None)
    wrong = cand(fast, equivalent=False)
    assert not results.eligible(wrong, allow_lossy=True, limit=None)
    big = cand(fast, peak_memory=2 * MiB)
    assert not results.eligible(big, allow_lossy=True, limit=MiB)


# -- the settings ----------------------------------------------------------------------------------
def test_budgets():
    assert parse_budget("10m", "--budget") == 600 and parse_budget("1.5h", "--budget") == 5400
    for bad in ("0", "-3", "ten", "5d"):
        with pytest.raises(DpwiseError, match="--budget"):
            parse_budget(bad, "--budget")


# -- the answer ------------------------------------------------------------------------------------
def test_the_answer_is_flags_train_takes_and_pytorchs_own_calls():
    cfg = TuneConfig(nproc=2, batch_size=64, model_args={"hidden": 32})
    config = {"bucket_cap_mb": 100.0, "comm_hook": "powersgd", "zero1": True, "accum_steps": 2}
    flags = results.train_flags(cfg, config)
    assert flags == (
        "dpwise train --strategy ddp --nproc 2 --model-arg hidden=32 --batch-size 32 "
        "--accum-steps 2 --bucket-cap-mb 100 --comm-hook powersgd --zero1"
    )
    code = results.snippet(cfg, config)
    assert "DDP(model, device_ids=[local_rank], bucket_cap_mb=100)" in code
    assert "model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)" in code
    assert "ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD" in code
    assert "no_sync" in code
    fsdp = TuneConfig(strategy="fsdp", nproc=2)
    assert "reshard_after_forward=False" in results.snippet(fsdp, {"reshard_after_forward": False})
    # the flags are train's: they parse and build a TrainConfig
    from dpwise.cli import build_parser
    from dpwise.commands.train import train_config

    args = build_parser().parse_args(flags.split()[1:])
    tc = train_config(args)
    assert (tc.batch_size, tc.accum_steps, tc.bucket_cap_mb, tc.comm_hook, tc.zero1) == (
        32, 2, 100.0, "powersgd", True)  # fmt: skip


# -- a candidate that fails ------------------------------------------------------------------------
def test_a_candidate_that_fails_is_recorded_as_data_by_its_worker(tmp_path):
    """The worker that saw the failure records it beside the journal (kind, rank, message);
    the session reads that record, never a traceback's text."""
    from dpwise.launch.failures import WorkerFailed
    from dpwise.tune import journal
    from dpwise.tune.search import CandidateFailed, Search
    from dpwise.tune.session import _cause

    class Refusing:
        def train(self, tc, warm, timed, first):
            raise DpwiseError("--zero1 needs two processes\nsecond line")

    cfg = TuneConfig(nproc=2, out=tmp_path)
    facts = dict(gradient_bytes=0, backend="gloo", device_type="cpu", world_size=2,
                 nproc_per_node=2, varying="", sparse="", find_unused_parameters=False)  # fmt: skip
    c = Candidate({"zero1": True})
    j = journal.Journal(settings={}, facts=facts, candidates=[c])
    search = Search(cfg, j, Refusing(), True, time.time(), lambda line: None)
    with pytest.raises(CandidateFailed):
        search._train(c, 1, 1, first=False)
    (found,) = journal.failures(tmp_path)
    assert (found.kind, found.rank, found.candidate) == ("error", 0, "zero1")
    assert found.message == "--zero1 needs two processes"
    killed = WorkerFailed(1, -9, "Signal 9 (SIGKILL) received by PID 7", "")
    assert _cause(killed, [found], "zero1") == "--zero1 needs two processes"
    assert _cause(killed, [], "zero1").startswith("worker rank 1 failed (exit code -9): Signal 9")
    journal.clear_failures(tmp_path)
    assert journal.failures(tmp_path) == []


# -- bad input, from the command line --------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--strategy", "dp"], "DataParallel has nothing to tune"),
        (["--budget", "0"], "--budget must be above 0"),
        (["--budget", "5"], "too small for one round"),
        (["--knobs", "reshard_after_forward"], "a knob of --strategy fsdp, not ddp"),
        (
            ["--model", "trapmodels:branching_model", "--knobs", "static_graph"],
            "the graph is not static",
        ),
        (["--resume"], "holds no search"),
        (["--env", "LOCAL_RANK=0", "WORLD_SIZE=2", "RANK=0"], "already a launched worker"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, run_here, args, says):
    """In this process, but for a launched worker's variables, which a fresh process is given:
    a refusal comes before anything starts."""
    out = tmp_path / "t"
    env = dict(a.split("=") for a in args[1:]) if args[0] == "--env" else {}
    if env:  # a torchrun worker's variables: tune starts its own workers
        got = run_cli("tune", "--nproc", "2", "--out", str(out), env=env, timeout=120)
    else:
        got = run_here("tune", "--nproc", "2", "--out", str(out), *args)
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpwise: error:") and says in lines[0]
    assert not out.exists()


# -- real searches ---------------------------------------------------------------------------------
def _results(out):
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_a_search_writes_the_contract_and_holds_each_candidate_to_the_default(tmp_path):
    out = tmp_path / "t"
    model = "trapmodels:running_norm_model"
    knobs = "gradient_as_bucket_view,accum_steps,zero1"
    got = run_cli("tune", "--nproc", "2", "--budget", "90", "--model", model, "--knobs", knobs,
                  "--out", str(out), timeout=300)  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc = _results(out)
    assert set(doc) >= {"default", "candidates", "winner"}
    keys = {"config", "outcome", "ratio", "low", "high", "peak_memory", "drift", "lossy", "reason"}
    by = {c["name"]: c for c in doc["candidates"]}
    for c in doc["candidates"]:
        assert keys <= set(c)
    assert {"train_flags", "snippet"} <= set(doc["winner"])
    # lossless and the same model: gradient views and ZeRO-1 (tolerance 1e-4)
    for name in ("gradient_as_bucket_view", "zero1"):
        assert by[name]["equivalent"] is True and by[name]["drift"]["max_param_diff"] <= 1e-4
        assert by[name]["peak_memory"] > 0
    # the running-norm buffer follows the micro-batches: split batches train another model
    split = by["accum_steps=2"]
    assert split["outcome"] == "rejected" and "not the default's model" in split["reason"]
    assert not doc["winner"].get("name", "").startswith("accum_steps")
    for name in ("report.md", "report.html"):
        assert "dpwise tune" in (out / name).read_text()
    assert doc["timing"]["elapsed_seconds"] <= 90 + 15
    # Markdown and HTML say the same winner
    assert doc["winner"]["train_flags"] in (out / "report.md").read_text()


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_measured_and_resume_finishes(tmp_path):
    out = tmp_path / "t"
    cmd = [sys.executable, "-m", "dpwise", "tune", "--nproc", "2", "--budget", "120",
           "--knobs", "gradient_as_bucket_view,static_graph", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=child_env(), stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    seen = ""
    deadline = time.monotonic() + 120
    # after the first round: a configuration without gain in its first 2 rounds is pruned, so
    # an interruption after the second could leave the resume nothing to measure
    while "round 1:" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume` continues" in err and "Traceback" not in err
    doc = _results(out)
    assert doc["stopped"] == "interrupted" and doc["rounds"] >= 1
    rounds = doc["rounds"]
    got = run_cli("tune", *cmd[4:], "--resume", timeout=300)
    assert got.returncode == 0, got.stderr
    doc = _results(out)
    assert doc["stopped"] == "finished" and doc["rounds"] > rounds
    assert doc["timing"]["sessions"] == 2


def _workers(tag: str) -> list[int]:
    """The launched workers of the command whose environment carries ``tag``: the fork server's
    children that start nothing themselves."""
    tagged = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"DPWISE_TEST_TAG={tag}".encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            continue
        tagged[int(entry)] = (parent, b"forkserver" in cmdline)
    parents = {parent for parent, _ in tagged.values()}
    return sorted(
        pid
        for pid, (parent, forked) in tagged.items()
        if forked and pid not in parents and tagged.get(parent, (0, False))[1]
    )


@pytest.mark.slow
def test_a_worker_killed_while_a_candidate_trains_fails_that_candidate_only(tmp_path):
    out, tag = tmp_path / "t", f"kill{os.getpid()}"
    cmd = [sys.executable, "-m", "dpwise", "tune", "--nproc", "2", "--budget", "120",
           "--knobs", "gradient_as_bucket_view,static_graph,zero1", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=child_env({"DPWISE_TEST_TAG": tag}), text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    seen = ""
    deadline = time.monotonic() + 120
    while "round 1:" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    journal = out / ".search" / "journal.json"
    victim = None
    while victim is None and time.monotonic() < deadline:  # wait for a candidate's training
        flight = json.loads(journal.read_text()).get("in_flight")
        if flight not in (None, "default"):
            victim = flight
            os.kill(_workers(tag)[-1], signal.SIGKILL)
        time.sleep(0.01)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    doc = _results(out)
    failed = [c for c in doc["candidates"] if c["outcome"] == "failed"]
    assert victim is not None and len(failed) == 1, doc["candidates"]
    assert "SIGKILL" in failed[0]["reason"], failed[0]["reason"]
    others = [c for c in doc["candidates"] if c is not failed[0]]
    assert all(c["rounds"] >= 2 for c in others)  # the search went on without it
    assert f"{failed[0]['name']} failed" in err and "the search goes on" in err
    assert doc["stopped"] == "finished"

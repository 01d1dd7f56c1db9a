"""`dpwise tune`: the knobs and candidates, the decisions, the answer, bad input, and real
searches (two workers on gloo): results.json's contract, equivalence, Ctrl-C and --resume (of
a copy, elsewhere, --out spelled another way), a worker killed while a candidate trains (and
what it leaves: nothing)."""

from __future__ import annotations

import json
import os
import shutil
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
from faults.live_run import LiveRun

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


def _journal(out) -> dict:
    try:
        return json.loads((out / ".search" / "journal.json").read_text())
    except (OSError, ValueError):
        return {}


# The smallest workload: every search below pays the fixed cost of its workers and trainings of at
# least 0.3 s of timed steps (any --budget up to 72 s: search.timed_steps, set by the first
# session); a budget above what it needs keeps a busy machine from ending it on the budget instead
# of its decisions (a resume may give more: its trainings keep the first session's steps).
TINY = ["--nproc", "2", "--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data",
        "--batch-size", "8"]  # fmt: skip
BUDGET = ["--budget", "72"]


@pytest.mark.slow
def test_a_search_writes_the_contract_and_holds_each_candidate_to_the_default(tmp_path, run_here):
    """In this process: the claim is about what the search writes, not about a fresh process
    (Ctrl-C and the killed worker below keep theirs). A global batch of 4 splits in two only
    (accum_steps=4 would leave one worker half a row): one training fewer per round, and the
    split still trains another model (its parameters 0.2 from the default's, the lossless
    knobs' 0.0)."""
    out = tmp_path / "t"
    model = "trapmodels:running_norm_model"
    knobs = "gradient_as_bucket_view,accum_steps,zero1"
    got = run_here("tune", "--nproc", "2", "--budget", "60", "--model", model, "--knobs", knobs,
                   "--batch-size", "4", "--out", str(out))  # fmt: skip
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
    assert doc["timing"]["elapsed_seconds"] <= 60 + 15
    # Markdown and HTML say the same winner
    assert doc["winner"]["train_flags"] in (out / "report.md").read_text()


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_measured_and_a_copy_resumed_elsewhere_finishes(tmp_path):
    """Ctrl-C after round 1 of a search started with a relative --out: exit 130, what was
    measured kept and published, the line saying how to continue. The folder, copied to another
    path (as to another machine), is resumed there with --out spelled absolute, from another
    working folder with another TMPDIR, and finishes the search; the original is untouched.
    (One search for what three tests proved: Ctrl-C and --resume; --out named another way;
    a search copied to another machine.)"""
    home, there = tmp_path / "first", tmp_path / "elsewhere"
    (home / "tmp").mkdir(parents=True)
    cmd = [sys.executable, "-m", "dpwise", "tune", *TINY, "--knobs", "gradient_as_bucket_view"]
    proc = subprocess.Popen([*cmd, *BUDGET, "--out", "t"], cwd=home, text=True,
                            env=child_env({"TMPDIR": str(home / "tmp")}), start_new_session=True,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        # after the first round: a configuration without gain in its first 2 rounds is pruned,
        # so an interruption after the second could leave the resume nothing to measure
        deadline = time.monotonic() + 120
        while _journal(home / "t").get("rounds", 0) < 1:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no round 1 within 120 s"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "--resume` continues" in err and "Traceback" not in err
    doc = _results(home / "t")
    assert doc["stopped"] == "interrupted" and doc["rounds"] >= 1
    rounds = _journal(home / "t")["rounds"]
    shutil.copytree(home / "t", there / "copy")  # another path, TMPDIR and working folder
    for folder in ("work", "tmp"):
        (there / folder).mkdir()
    # the copy spelled absolute (the first session's was relative), from another working folder
    got = subprocess.run([*cmd, "--budget", "120", "--out", str((there / "copy").absolute()),
                          "--resume"],
                         cwd=there / "work", env=child_env({"TMPDIR": str(there / "tmp")}),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc = _results(there / "copy")
    assert doc["stopped"] == "finished" and doc["rounds"] > rounds
    assert doc["timing"]["sessions"] == 2
    assert _journal(home / "t")["rounds"] == rounds  # the original is untouched


@pytest.mark.slow
def test_a_worker_killed_while_a_candidate_trains_fails_that_candidate_only(tmp_path):
    """kill -9 of a worker while a candidate trains its first round, recording its memory (its
    trace folder exists): that candidate fails with the cause, the search starts its workers
    again and finishes; nothing is left in TMPDIR, no process outlives the command.
    (One search for what two tests proved: this, and the trace folder a killed worker leaves.)"""
    out, tmp = tmp_path / "t", tmp_path / "tmp"
    knobs = ["--knobs", "gradient_as_bucket_view,zero1"]
    run = LiveRun(tmp, "tune", *TINY, *BUDGET, *knobs, "--out", str(out))
    victim = None
    try:
        deadline = time.monotonic() + 120
        while victim is None:
            flight = _journal(out).get("in_flight")
            if flight not in (None, "default") and list(tmp.rglob("dpwise-tune-trace-*")):
                victim = flight
                break
            assert run.proc.poll() is None, "the search ended before a candidate's trace"
            assert time.monotonic() < deadline, "no candidate's trace within 120 s"
            time.sleep(0.005)
        pids = run.worker_pids()
        os.kill(pids[max(pids)], signal.SIGKILL)
        code = run.finish(timeout=240)
    finally:
        run.kill()
    err = run.stderr
    assert code == 0, err
    assert run.temp_left() == []
    doc = _results(out)
    failed = [c for c in doc["candidates"] if c["outcome"] == "failed"]
    assert victim is not None and len(failed) == 1, doc["candidates"]
    assert "SIGKILL" in failed[0]["reason"], failed[0]["reason"]
    others = [c for c in doc["candidates"] if c is not failed[0]]
    assert all(c["rounds"] >= 2 for c in others)  # the search went on without it
    assert f"{failed[0]['name']} failed" in err and "the search goes on" in err
    assert doc["stopped"] == "finished"

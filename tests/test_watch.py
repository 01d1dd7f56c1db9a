"""`dpwise watch -- CMD` and `dpwise diagnose DIR`: a user's job run unedited, and its hang
named by rank, line and cause (tests/hangs: one job per cause users report), from the ranks'
Flight Recorder entries and stacks; the matcher alone on states made here."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch

from dpwise.watch.match import diagnose
from dpwise.watch.state import RankState

HANGS = Path(__file__).parent / "hangs"


def state(rank, colls, line=("train.py", 10, "<module>"), ended=None, steps=3, time=0.0):
    return RankState.from_json({
        "rank": rank, "pid": 100 + rank, "time": time, "steps": steps, "rows": 0,
        "collectives": [{"seq": s, "op": op, "sizes": [[4]], "done": done}
                        for s, op, done in colls],
        "stack": [("/home/u/job/" + line[0], line[1], line[2])], "ended": ended,
    })  # fmt: skip


DONE = [(1, "all_reduce", True), (2, "all_reduce", True)]


@pytest.mark.parametrize(
    ("states", "ended", "cause", "culprits"),
    [
        ([state(0, [*DONE, (3, "barrier", False)]), state(1, DONE, ended="returned")], {},
         "exited", (1,)),
        ([state(0, [*DONE, (3, "broadcast", False)]), state(1, [*DONE, (3, "all_reduce", False)])],
         {}, "different-collectives", (0, 1)),
        ([state(r, [*DONE, (3, "broadcast" if r == 2 else "all_reduce", False)]) for r in range(3)],
         {}, "different-collectives", (2,)),
        ([state(0, [*DONE, (3, "all_reduce", False)]), state(1, DONE, line=("eval.py", 4, "f"))],
         {}, "behind", (1,)),
        ([state(r, [*DONE, (3, "all_reduce", False)]) for r in range(2)], {}, "stalled", ()),
        ([state(r, DONE) for r in range(2)], {}, "no-collective", (0, 1)),
        ([state(0, [*DONE, (3, "all_reduce", False)]), state(1, DONE)],
         {1: "was killed by signal 9"}, "exited", (1,)),
        ([state(0, DONE, ended="raised RuntimeError: closed by peer", time=2.0),
          state(1, DONE, ended="raised ValueError", time=1.0)], {}, "exited", (1,)),
    ],
    ids=["returned", "two-paths", "one-odd-of-three", "behind", "stalled", "no-collective",
         "killed", "first-to-end"],
)  # fmt: skip
def test_the_matcher_names_the_cause_and_the_ranks_the_others_wait_for(
    states, ended, cause, culprits
):
    found = diagnose(states, ended)
    assert (found.cause, found.culprits) == (cause, culprits)
    assert [p.rank for p in found.places] == sorted(s.rank for s in states)


@pytest.fixture
def jobs(tmp_path, monkeypatch):
    home = tmp_path / "job"
    shutil.copytree(HANGS, home)
    monkeypatch.chdir(home)
    return home


HANG_AFTER = 2
WITHIN = HANG_AFTER + 15  # the bound: a diagnosis within --hang-after + 15 s


def watched(run_here, home: Path, script: str, *flags: str, args: tuple[str, ...] = ()):
    out = home / "watch"
    start = time.monotonic()
    job = ("torchrun", "--nproc_per_node=2", script, *args)
    flags = flags or ("--on-hang", "stop")
    got = run_here("watch", "--hang-after", str(HANG_AFTER), "--status-every", "0", "--out",
                   str(out), *flags, "--", *job)  # fmt: skip
    assert time.monotonic() - start <= WITHIN, f"{script} took {time.monotonic() - start:.1f} s"
    return got, out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("rank_guard.py", ["a rank ended while the others waited for it",
                           "rank 1 ended", "its script returned",
                           "rank 0 waits in barrier #7 at rank_guard.py line 9",
                           "lint: collective-under-rank-guard at rank_guard.py line 9"]),
        ("paths.py", ["they took different paths",
                      "rank 0 waits in broadcast #7 at paths.py line 12",
                      "rank 1 waits in all_reduce #7 at paths.py line 14"]),
        ("eval_gather.py", ["they took different paths",
                            "rank 0 waits in all_gather #7 at eval_gather.py line 12",
                            "rank 1 waits in all_reduce #7 at common.py line 13",
                            "lint: collective-under-rank-guard at eval_gather.py line 12"]),
        ("early_return.py", ["they took different paths",
                             "rank 0 waits in barrier #7 at early_return.py line 13",
                             "rank 1 waits in all_reduce #7 at common.py line 13"]),
        ("sleeps.py", ["some ranks wait in a collective that the others have not reached",
                       "rank 1 is in no collective at sleeps.py line 13 (its last collective: "
                       "all_reduce #6)", "rank 0 waits in all_reduce #7 at common.py line 13"]),
    ],
)  # fmt: skip
def test_a_hang_is_named_by_rank_line_and_cause_and_the_job_ended(jobs, run_here, script, said):
    got, out = watched(run_here, jobs, script)
    assert got.returncode == 1, got.stderr
    for words in said:
        assert words in got.stderr, got.stderr
    assert "dpwise watch: ending the job (--on-hang stop)" in got.stderr
    written = json.loads((out / "diagnosis.json").read_text())
    assert written["hang_after_s"] == 2 and written["places"][0]["rank"] == 0
    again = run_here("diagnose", str(out))  # the folder read again, after the fact
    assert again.returncode == 0
    assert all(words in again.stdout for words in said if not words.startswith("rank 1 ended"))


@pytest.mark.slow
def test_unequal_batches_are_said_at_the_first_pass_and_the_hang_named(jobs, run_here):
    """Rank 0 reads 5 batches, rank 1 4 (no DistributedSampler): said when both have started
    their pass, before the hang; then rank 0 waits in DDP's all-reduce while rank 1 waits in
    the barrier after its loop."""
    got, out = watched(run_here, jobs, "unequal.py")
    assert got.returncode == 1, got.stderr
    early = "the ranks' loader at unequal.py line 16 has different batch counts per pass " \
            "(rank 0 5, rank 1 4): rank(s) 0 will wait at batch 5 of each pass"  # fmt: skip
    assert early in got.stderr
    assert got.stderr.index(early) < got.stderr.index("dpwise: hang:")
    assert "rank 0 waits in all_reduce #10 at unequal.py line 17" in got.stderr
    assert "rank 1 waits in barrier #10 at unequal.py line 20" in got.stderr
    before = json.loads((out / "before.json").read_text())
    assert before["unequal"]["batches"] == {"0": 5, "1": 4}


@pytest.mark.slow
def test_a_straggler_is_named_with_its_lag(jobs, run_here):
    got, out = watched(run_here, jobs, "straggler.py")
    assert got.returncode == 0, got.stderr
    said = "dpwise watch: rank 1 is a straggler: it reaches the collectives 0."
    assert said in got.stderr and "dpwise: hang" not in got.stderr
    lag = json.loads((out / "before.json").read_text())["straggler"]["lag_s"]
    assert 0.12 <= lag <= 0.6  # it sleeps 0.15 s a step; a busy machine adds to it


@pytest.mark.slow
def test_a_rank_that_raises_ends_the_job_with_its_code_and_both_lines(jobs, run_here):
    got, out = watched(run_here, jobs, "raises.py")
    assert got.returncode == 1
    assert (
        "rank 1 ended at raises.py line 9: its script raised ValueError: rank 1 found a bad batch"
        in got.stderr
    )
    assert "rank 0 ended at common.py line 13: its script raised RuntimeError" in got.stderr
    assert json.loads((out / "ended.json").read_text()) == {"1": "ended with exit code 1"}


@pytest.mark.slow
def test_a_rank_out_of_memory_under_its_limit_is_named(jobs, run_here):
    got, _ = watched(run_here, jobs, "oom.py")
    assert got.returncode == 1
    said = "rank 1 ended at oom.py line 15 out of memory: its script raised RuntimeError"
    assert said in got.stderr and "can't allocate memory" in got.stderr


@pytest.mark.slow
def test_on_hang_keep_names_the_hang_and_lets_the_job_finish(jobs, run_here):
    """Rank 1 sleeps 5 s (a slow phase, not a deadlock): named after 2 s, then the job trains
    on and ends with its own code."""
    got, out = watched(run_here, jobs, "sleeps.py", "--on-hang", "keep", args=("5",))
    assert got.returncode == 0, got.stderr
    assert "rank 1 is in no collective at sleeps.py line 13" in got.stderr
    assert "ending the job" not in got.stderr and (out / "diagnosis.txt").is_file()


def test_one_process_alone_in_a_long_phase_is_no_hang(jobs, run_here):
    out = jobs / "watch"
    got = run_here("watch", "--hang-after", "1", "--status-every", "0", "--out", str(out), "--",
                   "python", "alone.py")  # fmt: skip
    assert got.returncode == 0 and "hang" not in got.stderr, got.stderr
    assert json.loads((out / "rank0.json").read_text())["steps"] == 1


@pytest.mark.slow
def test_a_script_that_spawns_its_own_ranks_is_watched_in_each(jobs, run_here):
    """mp.spawn's processes are the ranks (each with its watcher, its rank its process
    group's); rank 1 returns, so rank 0's barrier fails when its peer closes: said, with the
    rule."""
    out = jobs / "watch"
    got = run_here("watch", "--hang-after", "2", "--status-every", "0", "--out", str(out),
                   "--", "python", "spawned_guard.py")  # fmt: skip
    assert got.returncode == 1, got.stderr
    assert "rank 1 ended: its script returned" in got.stderr
    assert "rank 0 ended at spawned_guard.py line 17: its script raised RuntimeError" in got.stderr
    assert "lint: collective-under-rank-guard at spawned_guard.py line 17" in got.stderr


@pytest.mark.slow
def test_a_job_that_ends_with_its_own_code_passes_it_through_without_a_diagnosis(jobs, run_here):
    got, out = watched(run_here, jobs, "healthy.py")
    assert got.returncode == 3, got.stderr
    assert "dpwise:" not in got.stderr and not (out / "diagnosis.txt").exists()
    assert sorted(p.name for p in out.glob("rank*.json")) == ["rank0.json", "rank1.json"]
    assert json.loads((out / "rank0.json").read_text())["steps"] == 5


@pytest.mark.slow
def test_dpwise_s_own_train_is_watched_in_each_of_its_workers(jobs, run_here, monkeypatch):
    """`dpwise watch -- dpwise train …` runs the command as it is; each of its workers writes
    its state (the fixtures' models import in the command's own process)."""
    from conftest import FIXTURES

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])
    )
    out = jobs / "watch"
    got = run_here("watch", "--status-every", "0", "--out", str(out), "--", "dpwise", "train",
                   "--strategy", "ddp", "--nproc", "2", "--model", "userpkg:tiny_model", "--data",
                   "userpkg:tiny_data", "--batch-size", "8", "--epochs", "1", "--quiet", "--out",
                   str(jobs / "trained"))  # fmt: skip
    assert got.returncode == 0, got.stderr
    states = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    ends = [(s["rank"], s["steps"], s["ended"]) for s in states]
    assert ends == [(0, 8, "returned"), (1, 8, "returned")]
    assert (jobs / "trained" / "final.pt").is_file()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["watch"], "no command to watch: give it after --"),
        (["watch", "--"], "no command to watch: give it after --"),
        (
            ["watch", "--", "torchrun", "missing.py"],
            "the command after -- 'torchrun missing.py': missing.py does not exist",
        ),
        (
            ["watch", "--", "bash", "run.sh"],
            "the command after -- 'bash run.sh': bash does not exist",
        ),
        (["watch", "--", "python", "-c", "1"], "runs 'python -c', not a script file"),
        (
            ["watch", "--", "torchrun", "--nnodes", "2", "rank_guard.py"],
            "--nnodes 2: dpwise runs on one node; give --nnodes 1 (or leave it out)",
        ),
        (["watch", "--", "dpwise", "lint", "x.py"], "not dpwise lint"),
        pytest.param(
            ["watch", "--", "torchrun", "--nproc_per_node=gpu", "rank_guard.py"],
            "--nproc_per_node=gpu: Cuda is not available",
            id="gpu-on-a-cpu",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has GPUs"),
        ),
        (
            ["watch", "--out", "/proc/watch", "--", "python", "alone.py"],
            "--out /proc/watch: cannot write the ranks' states there",
        ),
        (["watch", "--hang-after", "0", "--", "python", "x.py"], "--hang-after must be positive"),
    ],
)
def test_bad_input_to_watch_is_one_line_exit_2_and_writes_nothing(jobs, run_here, args, said):
    got = run_here(*args)
    assert got.returncode == 2 and said in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert not (jobs / "runs").exists()


def test_diagnose_refuses_a_folder_it_cannot_read_in_one_line(tmp_path, run_here):
    assert run_here("diagnose", str(tmp_path / "none")).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    got = run_here("diagnose", str(empty))
    assert got.returncode == 2 and "holds no rank<R>.json" in got.stderr
    (empty / "rank0.json").write_text('{"rank": 0, "pid": 1, "ti')  # truncated
    got = run_here("diagnose", str(empty))
    assert got.returncode == 2 and "rank0.json is not a rank's state" in got.stderr
    (empty / "rank0.json").write_text('{"some": "other tool"}')  # foreign
    got = run_here("diagnose", str(empty))
    assert got.returncode == 2 and "(no 'rank')" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in empty.iterdir()) == ["rank0.json"]  # nothing written


@pytest.mark.slow
def test_diagnose_reads_a_jobs_own_flight_recorder_dumps_and_error_files(jobs, run_here):
    """A job run without dpwise, under torchrun, dumps each rank's Flight Recorder (pickled, as
    NCCL's dump on timeout); diagnose names the rank and line from the dumps alone, and reads
    torchelastic's error file beside them."""
    from conftest import run_module

    dumps = jobs / "dumps"
    dumps.mkdir()
    ran = run_module("torch.distributed.run", "--nproc_per_node=2", "dumps_itself.py",
                     str(dumps), env={"TORCH_FR_BUFFER_SIZE": "100"}, timeout=60)  # fmt: skip
    assert sorted(p.name for p in dumps.iterdir()) == ["trace_rank_0", "trace_rank_1"], ran.stderr
    got = run_here("diagnose", str(dumps))
    assert got.returncode == 0, got.stderr
    assert "some ranks wait in a collective that the others have not reached" in got.stdout
    assert "rank 1 is in no collective (its last collective: all_reduce #1)" in got.stdout
    assert "rank 0 waits in barrier #2 at dumps_itself.py line 30" in got.stdout
    assert "lint: collective-under-rank-guard at dumps_itself.py line 30" in got.stdout
    error = {"message": {"message": "ValueError: bad batch", "extraInfo": {"py_callstack": ""}}}
    (dumps / "1").mkdir()
    (dumps / "1" / "error.json").write_text(json.dumps(error))  # torchelastic's, per rank
    got = run_here("diagnose", str(dumps))
    assert "rank 1 ended: its script raised ValueError: bad batch" in got.stdout, got.stdout


def test_a_hostile_or_foreign_file_is_never_run_nor_taken_for_a_dump(tmp_path, run_here):
    import os
    import pickle

    class Hostile:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    (tmp_path / "trace_rank_0").write_bytes(pickle.dumps(Hostile()))
    (tmp_path / "trace_rank_1").write_bytes(b"\x80\x04not a pickle")
    got = run_here("diagnose", str(tmp_path))
    assert got.returncode == 2 and "no Flight Recorder dump" in got.stderr
    assert not (tmp_path / "ran").exists()


# NCCL's watchdog lines, in the format ProcessGroupNCCL writes them (our own numbers): rank 1 timed
# out in a broadcast that rank 0 never made, at the same sequence number as rank 0's all-reduce.
WATCHDOG = """\
epoch 3: loss 0.41
[rank0]:[E1203 10:00:01.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation \
timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=2048, NumelOut=2048, Timeout(ms)=600000) \
ran for 600012 milliseconds before timing out.
[rank0]:[E1203 10:00:01.2 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] \
Exception (either an error or timeout) detected by watchdog at work: 412, last enqueued NCCL \
work: 413, last completed NCCL work: 411.
[rank1]:[E1203 10:00:01.3 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation \
timeout: WorkNCCL(SeqNum=412, OpType=BROADCAST, NumelIn=16, NumelOut=16, Timeout(ms)=600000) ran \
for 600020 milliseconds before timing out.
"""


def test_diagnose_reads_nccls_watchdog_lines_in_a_jobs_log(tmp_path, run_here):
    (tmp_path / "job.log").write_text(WATCHDOG)
    got = run_here("diagnose", str(tmp_path))
    assert got.returncode == 0, got.stderr
    assert "the ranks wait in different collectives: they took different paths" in got.stdout
    assert "rank 0 waits in allreduce #412" in got.stdout
    assert "rank 1 waits in broadcast #412" in got.stdout

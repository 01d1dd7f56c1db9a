"""A folder that holds another command's results is refused by every command that writes one:
one line, exit 2, the folder byte for byte as it was. Each command's folder is made once, by a
real run, and copied for each case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

TINY = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]
COMPARE = ["compare", *TINY, "--epochs", "2", "--threads", "1", "--quiet", "--repeats", "1",
           "--strategies", "single", "--world-sizes", "1"]  # fmt: skip
TUNE = ["tune", *TINY, "--nproc", "2", "--budget", "30", "--knobs", "zero1", "--quiet"]
TRAIN = ["train", *TINY, "--epochs", "1", "--quiet"]
PROBE = ["probe-link", "--nproc", "2", "--max-bytes", "65536", "--json"]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file and folder under ``folder``, with the files' bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"<folder>"
        for p in folder.rglob("*")
    }


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """The folders of a finished compare, tune and train run (real runs, made once, in this
    process as conftest's run_here runs a command: what is tested is the folders they leave)."""
    from dpwise.cli import main

    root = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(FIXTURES))
        for name, args in (("compare", COMPARE), ("tune", TUNE), ("train", TRAIN)):
            argv = [*args, "--out", str(root / name)]
            mp.setattr(sys, "argv", ["dpwise", *argv])  # compare records its command line
            assert main(argv) in (0, 1), name
    assert (root / "tune" / "results.json").is_file() and (root / "train" / "final.pt").is_file()
    return {name: root / name for name in ("compare", "tune", "train")}


def _copy(made: dict[str, Path], which: str, tmp_path: Path) -> Path:
    out = tmp_path / f"{which}-out"
    shutil.copytree(made[which], out)
    return out


WRITERS = {"compare": COMPARE, "tune": TUNE, "train": TRAIN}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("writer", "folder", "offers"),
    [
        ("compare", "tune", "give compare another --out"),
        ("compare", "train", "give compare another --out"),
        ("tune", "compare", "give tune another --out or --overwrite"),
        ("tune", "train", "give tune another --out"),
        ("train", "compare", "give train another --out"),
        ("train", "tune", "give train another --out"),
    ],
)
def test_a_command_refuses_a_folder_of_another_commands_results(
    made, tmp_path, run_here, writer, folder, offers
) -> None:
    out = _copy(made, folder, tmp_path)
    before = _files(out)
    got = run_here(*WRITERS[writer], "--out", str(out))
    _one_line_error(got, f"--out {out}", f"dpwise {folder}'s results", offers)
    assert _files(out) == before, f"{writer} wrote into {folder}'s folder"


@pytest.mark.slow
def test_compare_refuses_a_stopped_search_and_tune_resume_refuses_what_is_not_its_own(
    made, tmp_path, run_here
) -> None:
    """A search killed before its first results leaves only its journal: still tune's. A search
    whose results.json is compare's is not resumed: its report would be compare's."""
    out = _copy(made, "tune", tmp_path)
    for name in ("results.json", "report.html", "report.md", "speedup_memory.png"):
        (out / name).unlink()
    before = _files(out)
    got = run_here(*COMPARE, "--out", str(out))
    _one_line_error(got, "dpwise tune's results (.search/journal.json)")
    assert _files(out) == before

    shutil.copy(made["compare"] / "results.json", out / "results.json")
    before = _files(out)
    got = run_here(*TUNE, "--resume", "--out", str(out))
    _one_line_error(got, "dpwise compare's results", "--overwrite")
    assert _files(out) == before


@pytest.mark.slow
def test_a_train_folder_is_refused_even_with_overwrite(made, tmp_path, run_here) -> None:
    """tune's --overwrite replaces another command's report, never a trained model; train's own
    rerun still replaces it."""
    out = _copy(made, "train", tmp_path)
    before = _files(out)
    got = run_here(*TUNE, "--overwrite", "--out", str(out))
    _one_line_error(got, "dpwise train's results (final.pt, metrics.json)")
    assert _files(out) == before
    assert "--overwrite" not in got.stderr
    got = run_here(*TRAIN, "--overwrite", "--out", str(out))  # train's own: replaced
    assert got.returncode == 0, got.stderr
    assert sorted(_files(out)) == ["final.pt", "metrics.json"] and _files(out) != before


@pytest.mark.slow
def test_a_results_json_no_dpwise_command_wrote_is_not_replaced(tmp_path, run_here) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"accuracy": 0.93}\n')
    for writer in ("compare", "train"):
        got = run_here(*WRITERS[writer], "--out", str(out))
        _one_line_error(got, "a results.json that no dpwise command wrote")
    assert _files(out) == {"results.json": b'{"accuracy": 0.93}\n'}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("compare", "results.json"),
        ("tune", "report.html"),
        ("train", "metrics.json"),
        ("train", "final.pt"),
    ],
)
def test_probe_link_does_not_write_its_json_over_another_commands_file(
    made, tmp_path, run_here, folder, name
) -> None:
    out = _copy(made, folder, tmp_path)
    before = _files(out)
    got = run_here(*PROBE, "--out", str(out / name))
    _one_line_error(got, f"--out {out / name}", f"dpwise {folder}'s results", "another file")
    assert got.stdout == "" and _files(out) == before


@pytest.mark.slow
def test_tune_overwrite_replaces_compares_report_and_the_files_it_named(
    made, tmp_path, run_here
) -> None:
    """The one replacement offered: the folder is then tune's alone (no run state, trace or plot
    of compare's is left), and compare refuses it."""
    out = _copy(made, "compare", tmp_path)
    named = json.loads((out / "results.json").read_text())
    assert (out / named["runs"][0]["final_state"]).is_file()
    got = run_here(*TUNE, "--overwrite", "--out", str(out))
    assert got.returncode == 0, got.stderr
    left = sorted(_files(out))
    assert not [n for n in left if n.startswith(("runs", "traces")) or n == "loss.png"], left
    assert json.loads((out / "results.json").read_text())["command"].startswith("dpwise tune")
    _one_line_error(run_here(*COMPARE, "--out", str(out)), "dpwise tune's results")

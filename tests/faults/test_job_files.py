"""The jobs advise and migrate write for a scheduler: written only where they can be, with names
the scheduler accepts, before anything else is written: a real read-only mount, a folder that
turns read-only or a link made while the command works, hostile file names (spaces, quotes,
`$(…)`, unicode, a leading dash, a newline, 200 characters) run through the scripts with stub
`srun`, `scontrol` and `torchrun` that record their arguments, a dangling symbolic link."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES_MIGRATE

ADVISE = ["advise", "--gpus", "8", "--nodes", "2", "--params", "1B"]
SCRIPT = FIXTURES_MIGRATE / "flat_single.py"
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # a PyTorchJob's name (the operator's rule)
ARGS = ["--script-args", "--tag 'a b'"]  # the script's own arguments, one with a space
HOSTILE = [
    "o6 ddp",
    "my \"quoted\" 'run'",
    "$(touch pwned)",
    "日本語 run",
    "-dash",
    "tab\tand\nnewline",
    "x" * 200,
    "2024 Run",
]


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _listing(folder: Path) -> list[tuple[str, str]]:
    """Every entry under ``folder``: its name and what it is (a link's target, a file's bytes)."""
    seen = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            seen.append((str(path), f"-> {os.readlink(path)}"))
        elif path.is_file():
            seen.append((str(path), path.read_bytes().hex()))
        else:
            seen.append((str(path), "folder"))
    return seen


def _mount(where: Path, options: str) -> None:
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {exc}")


@pytest.fixture
def mounts(tmp_path: Path):
    """Mounts a test makes (mount(name, options)), all unmounted at its end."""
    made: list[Path] = []

    def mount(name: str, options: str = "size=1m") -> Path:
        where = tmp_path / name
        _mount(where, options)
        made.append(where)
        return where

    try:
        yield mount
    finally:
        for where in reversed(made):
            subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


# 1. a read-only folder: one line before anything is written


def test_advise_job_into_a_read_only_folder_is_one_line(tmp_path: Path, mounts, run_here) -> None:
    ro = mounts("ro", "ro")
    before = _listing(tmp_path)
    proc = run_here(*ADVISE, "--scheduler", "slurm", "--job-out", str(ro / "job.sbatch"))
    line = _one_line(proc)
    assert str(ro / "job.sbatch") in line and "read-only file system" in line, line
    assert proc.stdout == ""  # no answer printed before the refusal
    assert _listing(tmp_path) == before


def test_migrate_checks_the_job_folder_before_writing_the_script(tmp_path, mounts, run_here):
    ro = mounts("ro", "ro")
    out = tmp_path / "o8.py"
    before = _listing(tmp_path)
    proc = run_here("migrate", str(SCRIPT), "-o", str(out), "--scheduler", "torchrun",
                    "--job-out", str(ro / "run.sh"))  # fmt: skip
    line = _one_line(proc)
    assert str(ro / "run.sh") in line and "read-only file system" in line, line
    assert not out.exists()
    assert _listing(tmp_path) == before


def test_a_script_that_cannot_be_written_takes_its_job_back(tmp_path, mounts, run_here) -> None:
    ro = mounts("ro", "ro")
    before = _listing(tmp_path)
    proc = run_here("migrate", str(SCRIPT), "-o", str(ro / "o.py"), "--scheduler", "slurm",
                    "--job-out", str(tmp_path / "job.sbatch"))  # fmt: skip
    assert str(ro / "o.py") in _one_line(proc)
    assert _listing(tmp_path) == before  # the job, written first, removed


def _during_migration(monkeypatch, action) -> None:  # type: ignore[no-untyped-def]
    """Run ``action`` while migrate works: after every check, before any write."""
    from dpwise.migrate import session

    real = session.migrate_source

    def migrate_then_act(text: str):  # type: ignore[no-untyped-def]
        done = real(text)
        action()
        return done

    monkeypatch.setattr(session, "migrate_source", migrate_then_act)


def test_a_folder_turned_read_only_meanwhile_writes_neither(tmp_path, mounts, run_here,
                                                           monkeypatch) -> None:  # fmt: skip
    jobs = mounts("jobs")
    remount = ["mount", "-o", "remount,ro", str(jobs)]
    _during_migration(monkeypatch, lambda: subprocess.run(remount, check=True, timeout=30))
    before = _listing(tmp_path)
    proc = run_here("migrate", str(SCRIPT), "-o", str(tmp_path / "o.py"), "--scheduler",
                    "kubernetes", "--job-out", str(jobs / "pj.yaml"))  # fmt: skip
    line = _one_line(proc)
    assert str(jobs / "pj.yaml") in line and "read-only file system" in line, line
    assert _listing(tmp_path) == before


def test_a_link_made_meanwhile_is_neither_replaced_nor_followed(tmp_path, run_here,
                                                               monkeypatch) -> None:  # fmt: skip
    job, aim = tmp_path / "job.sbatch", tmp_path / "elsewhere"
    _during_migration(monkeypatch, lambda: job.symlink_to(aim))
    proc = run_here("migrate", str(SCRIPT), "-o", str(tmp_path / "o.py"), "--scheduler",
                    "slurm", "--job-out", str(job))  # fmt: skip
    assert "made by another program" in _one_line(proc)
    assert _listing(tmp_path) == [(str(job), f"-> {aim}")]


def test_a_full_job_folder_writes_neither(tmp_path, mounts, run_here, monkeypatch) -> None:
    jobs = mounts("jobs", "size=64k")
    ballast = jobs / "ballast"

    def fill() -> None:
        with open(ballast, "wb") as fh, pytest.raises(OSError):
            fh.write(b"\0" * 128 * 1024)  # to the last byte

    _during_migration(monkeypatch, fill)
    proc = run_here("migrate", str(SCRIPT), "-o", str(tmp_path / "o.py"), "--scheduler",
                    "slurm", "--job-out", str(jobs / "job.sbatch"))  # fmt: skip
    line = _one_line(proc)
    assert "no space left on device" in line and str(jobs / "job.sbatch") in line, line
    assert sorted(p.name for p in jobs.iterdir()) == ["ballast"]
    assert not (tmp_path / "o.py").exists()


# 3. names the scheduler accepts, arguments the shell keeps whole


def _stubs(folder: Path) -> Path:
    """srun, scontrol and torchrun that record the arguments they are given (torchrun's in
    ARGV.json) and run nothing."""
    folder.mkdir()
    record = 'import json, sys; json.dump(sys.argv[1:], open("ARGV.json", "w"))'
    programs = {
        "srun": '#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\nexec "$@"\n',
        "scontrol": "#!/bin/bash\necho node1\n",
        "torchrun": f"#!/bin/bash\nexec python3 -c '{record}' \"$@\"\n",
    }
    for name, text in programs.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def _run_job(job: Path, stubs: Path, cwd: Path) -> list[str]:
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "NODE0": "node1", "SLURM_JOB_ID": "7",
           "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node[1-2]"}  # fmt: skip
    done = subprocess.run(["bash", str(job)], cwd=cwd, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads((cwd / "ARGV.json").read_text())


def _sbatch_name(text: str) -> str:
    """--job-name as sbatch reads it: #SBATCH arguments split at white space, '#' ends them."""
    line = next(line for line in text.splitlines() if line.startswith("#SBATCH --job-name="))
    words = line.removeprefix("#SBATCH").split()
    assert words[1].startswith("#"), line  # nothing else before the comment
    return words[0].removeprefix("--job-name=")


def _rdzv_id(text: str) -> str:
    """The torchrun line's rendezvous id when JOB_ID is not set: the job's name."""
    found = re.search(r"\$\{JOB_ID:-([^}]*)\}", text)
    assert found, text
    return found.group(1)


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes", "torchrun"])
def test_hostile_file_names_give_valid_jobs(tmp_path, run_here, monkeypatch, scheduler) -> None:
    monkeypatch.chdir(tmp_path)
    stubs = _stubs(tmp_path / "stubs")
    for index, stem in enumerate(HOSTILE):
        out, job = Path(f"{stem}.py"), tmp_path / f"job{index}"
        proc = run_here("migrate", str(SCRIPT), f"--out={out}", "--scheduler", scheduler,
                        "--job-out", str(job), "--nodes", "2", *ARGS)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert out.is_file() and job.is_file(), stem
        argument = f"./{out}" if stem.startswith("-") else str(out)  # never taken for an option
        if "\n" not in stem:  # the printed line, as a shell reads it
            said = next(x for x in proc.stdout.splitlines() if x.startswith("run it with: "))
            assert shlex.split(said.removeprefix("run it with: "))[-1] == argument, said
        text = job.read_text()
        if scheduler == "kubernetes":
            manifest = yaml.safe_load(text)
            name = manifest["metadata"]["name"]
            container = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
            command = container["containers"][0]["command"]
            assert command == ["torchrun", argument, "--tag", "a b"], command
        else:
            name = _sbatch_name(text) if scheduler == "slurm" else _rdzv_id(text)
            assert _run_job(job, stubs, tmp_path)[-3:] == [argument, "--tag", "a b"], stem
        assert DNS_1035.fullmatch(name) and len(name) <= 50, (stem, name)
    assert not (tmp_path / "pwned").exists()


def test_a_name_with_nothing_to_keep_is_one_line(tmp_path, run_here, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = _listing(tmp_path)
    for stem in ("日本語", "___", "-"):
        proc = run_here("migrate", str(SCRIPT), f"--out={stem}.py", "--scheduler", "kubernetes")
        line = _one_line(proc)
        assert f"{stem}.py" in line and "no letter or digit" in line, line
        assert _listing(tmp_path) == before


# 4. a dangling symbolic link is an existing file


@pytest.mark.parametrize("command", ["advise", "migrate"])
def test_a_dangling_link_is_never_replaced(tmp_path, run_here, command) -> None:
    link, aim = tmp_path / "L", tmp_path / "nowhere"
    link.symlink_to(aim)
    argv = (
        [*ADVISE, "--scheduler", "slurm"]
        if command == "advise"
        else ["migrate", str(SCRIPT), "-o", str(tmp_path / "o.py"), "--scheduler", "slurm"]
    )
    proc = run_here(*argv, "--job-out", str(link))
    line = _one_line(proc)
    assert line == (
        f"dpwise: error: --job-out {link} exists (a symbolic link to {aim}): give another "
        "path, or remove it first"
    )
    assert _listing(tmp_path) == [(str(link), f"-> {aim}")]


def test_job_out_on_the_migrated_script_is_one_line(tmp_path, run_here) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path)  # the same folder by another name
    proc = run_here("migrate", str(SCRIPT), "-o", str(tmp_path / "o.py"), "--scheduler", "slurm",
                    "--job-out", str(alias / "o.py"))  # fmt: skip
    assert "is -o's file" in _one_line(proc)
    assert _listing(tmp_path) == [(str(alias), f"-> {tmp_path}")]


def test_without_hard_links_the_exclusive_create_refuses_links_too(tmp_path, monkeypatch):
    """A file system without link(2) (FAT: EPERM) falls back on O_EXCL | O_NOFOLLOW."""
    from dpwise.infra import newfile

    def no_links(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    job = tmp_path / "a"
    made = newfile.create(job, b"job\n", 0o755)
    assert job.read_bytes() == b"job\n" and job.stat().st_mode & 0o777 == 0o755
    (tmp_path / "L").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        newfile.create(tmp_path / "L", b"x", 0o644)
    assert not (tmp_path / "nowhere").exists()
    newfile.remove(job, made)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L"]


def test_a_job_under_a_file_is_one_line(tmp_path, run_here) -> None:
    (tmp_path / "afile").write_text("mine\n")
    before = _listing(tmp_path)
    proc = run_here(*ADVISE, "--scheduler", "torchrun", "--job-out", str(tmp_path / "afile" / "r"))
    assert _one_line(proc).endswith(f"{tmp_path / 'afile'} is not a folder")
    assert _listing(tmp_path) == before

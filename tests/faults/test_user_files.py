"""A user's files under dpwise's writers (`lint --fix`, `migrate -o`) and readers (`migrate`): an
edit made meanwhile is kept, nothing outside the given paths is written, owner and mode stay,
and a FIFO, a device or a huge file is refused in one line without blocking or filling memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import child_env
from dpwise.cli import main
from dpwise.infra import userfile
from dpwise.lint import fixer

BAD = 'import os\nos.environ["MASTER_PORT"] = "29500"\n'  # DPW008, an unsafe fix
FIXED = 'import os\nos.environ.setdefault("MASTER_PORT", "29500")\n'
FIX = ["lint", "--fix", "--unsafe-fixes"]
DP_SCRIPT = "import torch\nmodel = torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda())\n"


def _one_error_line(capsys) -> str:  # type: ignore[no-untyped-def]
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# -- an edit made while dpwise works is kept ------------------------------------------------------
def test_an_edit_made_while_fix_runs_is_kept_and_reported(tmp_path, monkeypatch, capsys):
    """Another program appends to the file after --fix read it and before it writes back."""
    target = tmp_path / "train.py"
    target.write_text(BAD)
    real_fix = fixer.fix_source

    def fix_while_someone_edits(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_fix(*args, **kwargs)
        writer = subprocess.run(["sh", "-c", f"echo '# my edit' >> '{target}'"], check=True)
        assert writer.returncode == 0
        return result

    monkeypatch.setattr(fixer, "fix_source", fix_while_someone_edits)
    assert main([*FIX, str(target)]) == 2
    assert "changed while dpwise worked on it" in capsys.readouterr().err
    assert target.read_text() == BAD + "# my edit\n"


def test_a_write_in_the_instant_before_the_rename_is_put_back(tmp_path, monkeypatch):
    """The narrowest window: after the last check, before the rename. The other write lands in
    the old file, which the rename would unlink: it is put back, and the fix reported as lost."""
    target = tmp_path / "train.py"
    target.write_text(BAD)
    _, stamp = userfile.read(target)
    real_replace = os.replace

    def late_writer(src, dst):  # type: ignore[no-untyped-def]
        with open(target, "a") as other:
            other.write("# typed just now\n")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", late_writer)
    with pytest.raises(userfile.Changed):
        userfile.replace(target, FIXED.encode(), stamp)
    monkeypatch.setattr(os, "replace", real_replace)
    assert target.read_text() == BAD + "# typed just now\n"
    assert not [p for p in tmp_path.iterdir() if p.name != "train.py"]  # no temporary left


def test_a_file_replaced_by_an_editor_meanwhile_is_left(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BAD)
    _, stamp = userfile.read(target)
    saved = tmp_path / "editor.tmp"
    saved.write_text(BAD)  # same text, another file renamed over it: an editor's save
    os.replace(saved, target)
    with pytest.raises(userfile.Changed):
        userfile.replace(target, FIXED.encode(), stamp)
    assert target.read_text() == BAD


# -- nothing outside the given paths; owner and mode kept -----------------------------------------
def test_a_link_out_of_the_given_folder_is_not_followed_by_fix(tmp_path, capsys):
    outside = tmp_path / "outside.py"
    outside.write_text(BAD)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "link.py").symlink_to(outside)
    (folder / "own.py").write_text(BAD)
    assert main([*FIX, str(folder)]) == 2
    assert "outside the paths given; not written" in capsys.readouterr().err
    assert outside.read_text() == BAD and (folder / "link.py").is_symlink()
    assert (folder / "own.py").read_text() == FIXED
    # named itself, the file is fixed; a link inside the folder to a file inside it is followed
    inside = folder / "inside.py"
    inside.write_text(BAD)
    (folder / "alias.py").symlink_to(inside)
    (folder / "link.py").unlink()
    assert main([*FIX, str(folder)]) == 0
    assert inside.read_text() == FIXED and (folder / "alias.py").is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_fix_keeps_the_files_owner_group_and_mode(tmp_path):
    target = tmp_path / "train.py"
    target.write_text(BAD)
    os.chown(target, 1234, 4321)
    target.chmod(0o640)
    assert main([*FIX, str(target)]) == 0
    info = target.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (1234, 4321, 0o640)
    assert target.read_text() == FIXED


def test_an_owner_that_cannot_be_kept_writes_nothing(tmp_path, monkeypatch, capsys):
    target = tmp_path / "train.py"
    target.write_text(BAD)
    _, stamp = userfile.read(target)
    other = userfile.Stamp(**{**stamp.__dict__, "uid": stamp.uid + 1})

    def refused(*_):  # type: ignore[no-untyped-def]
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refused)
    with pytest.raises(userfile.DpwiseError, match="cannot give a new file"):
        userfile.replace(target, FIXED.encode(), other)
    assert target.read_text() == BAD and [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_migrate_o_over_a_file_edited_meanwhile_leaves_it(tmp_path, monkeypatch, capsys):
    script, out = tmp_path / "train.py", tmp_path / "train_ddp.py"
    script.write_text(DP_SCRIPT)
    out.write_text("# the user's own file\n")
    out.chmod(0o600)
    from dpwise.migrate import session

    real = session.migrate_source

    def slow_migration(text):  # type: ignore[no-untyped-def]
        with open(out, "a") as other:
            other.write("# edited meanwhile\n")
        return real(text)

    monkeypatch.setattr(session, "migrate_source", slow_migration)
    assert main(["migrate", str(script), "-o", str(out)]) == 2
    assert "changed while dpwise worked on it" in _one_error_line(capsys)
    assert out.read_text() == "# the user's own file\n# edited meanwhile\n"
    monkeypatch.setattr(session, "migrate_source", real)
    assert main(["migrate", str(script), "-o", str(out)]) == 0
    assert "DistributedDataParallel" in out.read_text() and out.stat().st_mode & 0o777 == 0o600


# -- what migrate reads -----------------------------------------------------------------------
def test_migrate_refuses_a_fifo_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)  # nobody ever writes: a plain read would block forever
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(main(["migrate", str(fifo)])))
    runner.start()
    runner.join(timeout=30)
    assert codes == [2], "migrate blocked on a FIFO"
    assert "not a regular file" in _one_error_line(capsys)


def test_migrate_refuses_dev_zero_under_a_memory_limit_in_one_line():
    """A fresh process limited to 2 GiB of address space: it must not even try to read."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run(
        [sys.executable, "-m", "dpwise", "migrate", "/dev/zero"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        preexec_fn=limit,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "dpwise: error: /dev/zero: not a regular file (a FIFO, socket or device)"
    )


def test_migrate_refuses_a_huge_script_before_reading_it(tmp_path, capsys):
    from dpwise.migrate.session import MAX_SCRIPT_BYTES

    huge = tmp_path / "generated.py"
    huge.write_text(DP_SCRIPT + "x = 1\n" * (MAX_SCRIPT_BYTES // 6 + 1))
    assert main(["migrate", str(huge)]) == 2
    assert "over the 256 KiB limit" in _one_error_line(capsys)


@pytest.mark.parametrize("args", ["--name 'my run", 'a "b', "trailing\\"])
def test_script_args_that_do_not_parse_are_one_line(args, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(DP_SCRIPT)
    assert main(["migrate", str(script), "--verify", "--script-args", args]) == 2
    assert "--script-args" in _one_error_line(capsys)


def test_migrate_on_a_long_script_says_it_is_working(tmp_path, capsys):
    from dpwise.migrate.session import SAY_LINES

    script = Path(tmp_path / "train.py")
    script.write_text(DP_SCRIPT + "pass\n" * (SAY_LINES + 1))
    assert main(["migrate", str(script)]) == 0
    assert "lines to analyse" in capsys.readouterr().err

"""`dpwise migrate`'s run: read the script, rewrite it, --verify the rewrite by training both,
and write -o (atomically, and only once every step succeeded), with --scheduler's job: its name
and its file are checked before any work, and it is written first, as a new file, and taken back
if -o then fails."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dpwise.advise import jobscript
from dpwise.errors import DpwiseError
from dpwise.infra import newfile, userfile
from dpwise.infra.atomic import atomic_write_text
from dpwise.migrate import Migration, migrate_source
from dpwise.migrate.settings import MigrateConfig

if TYPE_CHECKING:
    from dpwise.migrate.verify import Verdict


# A training script is a few thousand lines at most; the analysis takes about a millisecond per
# statement on one core (a 20,000-line file: 21 s), so 256 KiB bounds a run to about ten seconds.
MAX_SCRIPT_BYTES = 256 * 1024
SAY_LINES = 3000


@dataclass(frozen=True)
class Migrated:
    text: str  # the original script
    migration: Migration  # the new text and its edits
    verdict: Verdict | None  # --verify's; None without it
    job: dict[str, str] | None = None  # --scheduler's job, written: jobscript.summary


def migrate_script(cfg: MigrateConfig) -> Migrated:
    """The migrated script of ``cfg.script``, verified and written to -o where asked. Raises
    MigrationRefused for a pattern it cannot handle, DpwiseError for bad input or a failed run
    (nothing is written then)."""
    text = _read(cfg)
    args = _script_args(cfg.script_args)
    if cfg.out is not None and cfg.out.resolve() == cfg.script.resolve():
        raise DpwiseError(
            f"-o {cfg.out} is the script itself: write the migrated script to a new file "
            "(the original stays, to compare against and to --verify)"
        )
    job = _job(cfg, args)  # before any work: its name, and a folder it can be written in
    before = _existing(cfg.out) if cfg.out is not None and not cfg.diff else None
    migration = migrate_source(text)
    verdict = None
    if cfg.verify:  # before -o is written: a failed run writes nothing
        from dpwise.migrate.verify import verify

        verdict = verify(cfg.script, migration.code, args, steps=cfg.verify_steps)
    if cfg.out is not None and not cfg.diff:
        _write(cfg, migration.code, before, job)
    return Migrated(text, migration, verdict, jobscript.summary(*job) if job else None)


Job = tuple[jobscript.JobSpec, Path]


def _job(cfg: MigrateConfig, args: list[str]) -> Job | None:
    """--scheduler's job and where it goes, checked: a valid name, a new file, a writable folder."""
    if cfg.scheduler is None or cfg.out is None:
        return None
    spec = jobscript.for_script(cfg.scheduler, cfg.out, tuple(args), cfg.nodes, cfg.gpus)
    target = cfg.job_out or jobscript.default_path(cfg.scheduler)
    if os.path.realpath(target) == os.path.realpath(cfg.out):
        raise DpwiseError(f"--job-out {target} is -o's file: give the job another path")
    jobscript.check_target(target)
    return spec, target


def _write(cfg: MigrateConfig, code: str, before: userfile.Stamp | None, job: Job | None) -> None:
    """The job first (a new file, so it can be taken back), then -o; the job is removed when -o
    cannot be written: the command leaves both or neither."""
    made = jobscript.write(*job) if job else None
    try:
        _write_out(cfg, code, before)
    except BaseException:
        if job and made:
            newfile.remove(job[1], made)
        raise


def _write_out(cfg: MigrateConfig, code: str, before: userfile.Stamp | None) -> None:
    assert cfg.out is not None
    try:
        if before is None:
            if cfg.out.exists():
                raise userfile.Changed(
                    f"-o {cfg.out}: created by another program while "
                    "dpwise worked; left as it is: run the command again"
                )
            atomic_write_text(cfg.out, code)
        else:  # a file the user had: kept if it changed meanwhile, owner and mode kept
            userfile.replace(cfg.out, code.encode("utf-8"), before)
    except OSError as exc:
        raise DpwiseError(
            f"cannot write {cfg.out}: {exc.strerror}; choose a writable path for -o"
        ) from None


def _read(cfg: MigrateConfig) -> str:
    """The script's text: a regular file (never a device or FIFO), up to MAX_SCRIPT_BYTES."""
    try:
        data, _ = userfile.read(cfg.script, MAX_SCRIPT_BYTES)
        text = data.decode("utf-8")
    except OSError as exc:
        raise DpwiseError(
            f"cannot read {cfg.script}: {exc.strerror}; give a readable script"
        ) from None
    except UnicodeDecodeError:
        raise DpwiseError(
            f"{cfg.script} is not UTF-8 text: give a Python training script"
        ) from None
    lines = text.count("\n")
    if lines > SAY_LINES:  # seconds of work: say so before it starts
        print(f"dpwise migrate: {cfg.script}: {lines:,} lines to analyse...", file=sys.stderr)
    return text


def _existing(out: Path) -> userfile.Stamp | None:
    """The stamp of the file -o would replace (None: no such file yet)."""
    try:
        return userfile.read(out)[1]
    except FileNotFoundError:
        return None
    except userfile.TooLarge as exc:
        raise DpwiseError(
            f"-o {out} is a {exc.size / 2**20:.1f} MiB file, not a script to replace; choose "
            "another path"
        ) from None
    except OSError as exc:
        raise DpwiseError(
            f"cannot read {out}: {exc.strerror}; choose a writable path for -o"
        ) from None


def _script_args(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise DpwiseError(
            f"--script-args {text!r}: {str(exc).lower()}; quote it as the shell would "
            "(e.g. --script-args \"--name 'my run'\")"
        ) from None

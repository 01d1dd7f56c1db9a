"""`dpwise migrate`'s run: read the script, rewrite it, --verify the rewrite by training both,
and write -o (atomically, and only once every step succeeded)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dpwise.errors import DpwiseError
from dpwise.infra import userfile
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
    before = _existing(cfg.out) if cfg.out is not None and not cfg.diff else None
    migration = migrate_source(text)
    verdict = None
    if cfg.verify:  # before -o is written: a failed run writes nothing
        from dpwise.migrate.verify import verify

        verdict = verify(cfg.script, migration.code, args, steps=cfg.verify_steps)
    if cfg.out is not None and not cfg.diff:
        try:
            if before is None:
                if cfg.out.exists():
                    raise userfile.Changed(
                        f"-o {cfg.out}: created by another program while "
                        "dpwise worked; left as it is: run the command again"
                    )
                atomic_write_text(cfg.out, migration.code)
            else:  # a file the user had: kept if it changed meanwhile, owner and mode kept
                userfile.replace(cfg.out, migration.code.encode("utf-8"), before)
        except OSError as exc:
            raise DpwiseError(
                f"cannot write {cfg.out}: {exc.strerror}; choose a writable path for -o"
            ) from None
    return Migrated(text, migration, verdict)


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

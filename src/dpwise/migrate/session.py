"""`dpwise migrate`'s run: read the script, rewrite it, --verify the rewrite by training both,
and write -o (atomically, and only once every step succeeded)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_write_text
from dpwise.migrate import Migration, migrate_source
from dpwise.migrate.settings import MigrateConfig

if TYPE_CHECKING:
    from dpwise.migrate.verify import Verdict


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
    if cfg.out is not None and cfg.out.resolve() == cfg.script.resolve():
        raise DpwiseError(
            f"-o {cfg.out} is the script itself: write the migrated script to a new file "
            "(the original stays, to compare against and to --verify)"
        )
    migration = migrate_source(text)
    verdict = None
    if cfg.verify:  # before -o is written: a failed run writes nothing
        from dpwise.migrate.verify import verify

        args = shlex.split(cfg.script_args)
        verdict = verify(cfg.script, migration.code, args, steps=cfg.verify_steps)
    if cfg.out is not None and not cfg.diff:
        try:
            atomic_write_text(cfg.out, migration.code)
        except OSError as exc:
            raise DpwiseError(
                f"cannot write {cfg.out}: {exc.strerror}; choose a writable path for -o"
            ) from None
    return Migrated(text, migration, verdict)


def _read(cfg: MigrateConfig) -> str:
    try:
        return cfg.script.read_text(encoding="utf-8")
    except OSError as exc:
        raise DpwiseError(
            f"cannot read {cfg.script}: {exc.strerror}; give a readable script"
        ) from None
    except UnicodeDecodeError:
        raise DpwiseError(
            f"{cfg.script} is not UTF-8 text: give a Python training script"
        ) from None

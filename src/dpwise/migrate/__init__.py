"""Owns: `dpwise migrate`: a script's facts, the edits that rewrite it for torchrun, their one-pass
apply, --verify (its scripts run by userscript's harness), its settings, run and text.
May import: advise (the job scripts), userscript, lint, diagnosis, infra, errors
Imported by: commands

`dpwise migrate`: a single-process or DataParallel training script rewritten into one that runs
under torchrun (one process per device, DistributedDataParallel) and still runs alone.

    from dpwise.migrate import migrate_source
    result = migrate_source(text)      # raises MigrationRefused(reasons) for unsafe patterns
    result.code, result.edits          # the new text; each edit's `what` and lint `rule`

LibCST keeps the script's comments and formatting outside the edits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpwise.migrate.refusal import MigrationRefused

if TYPE_CHECKING:  # edits imports LibCST, which building the command line must not
    from dpwise.migrate.edits import Edit


@dataclass(frozen=True)
class Migration:
    code: str
    edits: list[Edit]


def migrate_source(text: str) -> Migration:
    import libcst as cst

    from dpwise.errors import DpwiseError
    from dpwise.migrate.edits import apply
    from dpwise.migrate.plan import plan

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise DpwiseError(f"cannot parse the script: {str(exc).splitlines()[0]}") from None
    edits = plan(module)
    return Migration(apply(module, edits).code, edits)


__all__ = ["Migration", "MigrationRefused", "migrate_source"]

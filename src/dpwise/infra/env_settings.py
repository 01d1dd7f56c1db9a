"""EnvRequest: how `dpwise env` prints its report (a setting, dpwise.infra.settings). Kept apart
from the report itself, which imports torch: the command line is built without it."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.infra.settings import setting


@dataclass(frozen=True, kw_only=True)
class EnvRequest:
    json: bool = setting(False, action="store_true", help="machine-readable report")

"""The refusal: every reason a script cannot be migrated safely, at once."""

from __future__ import annotations

from dpwise.errors import DpwiseError


class MigrationRefused(DpwiseError):
    """The script needs a person first; `reasons` says where and why, one line each."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))

"""results.json (schema 1), typed: the runs and checks as records, the rest as its JSON parts.

``from_json`` reads every schema-1 file, older ones included (a key a file lacks takes its
default); ``to_json`` writes every key the document has always had, in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpwise.checks.base import CheckResult
from dpwise.compare.records import Json, Run

SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Results:
    """What one `dpwise compare` measured and concluded.

    ``workload``, ``environment``, ``diagnosis``, ``recommendation``, ``claims``, ``plots`` and
    ``timing`` are plain JSON parts: read by the report and ``advise --from`` as they are.
    """

    schema: int = SCHEMA
    dpwise_version: str = ""
    created: str = ""
    command: str = ""
    workload: Json = field(default_factory=dict)
    environment: Json = field(default_factory=dict)
    runs: tuple[Run, ...] = ()
    diagnosis: Json | None = None
    checks: tuple[CheckResult, ...] = ()
    recommendation: Json = field(default_factory=dict)
    claims: tuple[Json, ...] = ()
    plots: dict[str, str] = field(default_factory=dict)
    timing: Json | None = None  # set once the report is written

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs if r.id == run_id), None)

    def to_json(self) -> Json:
        out = {
            "schema": self.schema,
            "dpwise_version": self.dpwise_version,
            "created": self.created,
            "command": self.command,
            "workload": self.workload,
            "environment": self.environment,
            "runs": [r.to_json() for r in self.runs],
            "diagnosis": self.diagnosis,
            "checks": [c.to_dict() for c in self.checks],
            "recommendation": self.recommendation,
            "claims": [*self.claims],
            "plots": dict(self.plots),
        }
        if self.timing is not None:
            out["timing"] = self.timing
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Results:
        return cls(
            schema=d.get("schema", SCHEMA),
            dpwise_version=str(d.get("dpwise_version") or ""),
            created=str(d.get("created") or ""),
            command=str(d.get("command") or ""),
            workload=dict(d.get("workload") or {}),
            environment=dict(d.get("environment") or {}),
            runs=tuple(Run.from_json(r) for r in d.get("runs") or () if isinstance(r, Mapping)),
            diagnosis=d.get("diagnosis"),
            checks=tuple(
                CheckResult.from_json(c) for c in d.get("checks") or () if isinstance(c, Mapping)
            ),
            recommendation=dict(d.get("recommendation") or {}),
            claims=tuple(d.get("claims") or ()),
            plots=dict(d.get("plots") or {}),
            timing=d.get("timing"),
        )

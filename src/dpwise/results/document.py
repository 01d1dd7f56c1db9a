"""results.json (schema 1), typed: the runs and checks as records, the rest as its JSON parts.

``from_json`` reads every schema-1 file, older ones included (a key a file lacks takes its
default); ``to_json`` writes every key the document has always had, in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpwise.results.records import CheckResult, Json, Run

SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Results:
    """What one `dpwise compare` measured and concluded.

    ``workload``, ``environment``, ``diagnosis``, ``recommendation``, ``claims``, ``plots``,
    ``timing`` and ``link_probe`` are plain JSON parts: read by the report and ``advise --from``
    as they are.
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
    plots: dict[str, str] | None = None  # {plot key: file}; None until the report is written
    timing: Json | None = None  # set once the report is written
    link_probe: Json | None = None  # the link between the largest ddp run's processes, and "run"
    projection: Json | None = None  # dpwise.projection.section.build(); None: not projected
    load: Json | None = None  # how busy the machine was while the runs measured (other processes)

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
            "plots": dict(self.plots or {}),
        }
        if self.timing is not None:
            out["timing"] = self.timing
        if self.link_probe is not None:
            out["link_probe"] = self.link_probe
        if self.projection is not None:
            out["projection"] = self.projection
        if self.load is not None:
            out["load"] = self.load
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Results:
        """Any results.json of schema 1; a part that is missing or malformed takes its default."""

        def part(key: str) -> Json:
            value = d.get(key)
            return dict(value) if isinstance(value, Mapping) else {}

        def items(key: str) -> list[Mapping[str, Any]]:
            value = d.get(key)
            return [x for x in value if isinstance(x, Mapping)] if isinstance(value, list) else []

        plots = d.get("plots")
        return cls(
            schema=d.get("schema", SCHEMA),
            dpwise_version=str(d.get("dpwise_version") or ""),
            created=str(d.get("created") or ""),
            command=str(d.get("command") or ""),
            workload=part("workload"),
            environment=part("environment"),
            runs=tuple(Run.from_json(r) for r in items("runs")),
            diagnosis=d.get("diagnosis"),
            checks=tuple(CheckResult.from_json(c) for c in items("checks")),
            recommendation=part("recommendation"),
            claims=tuple(dict(c) for c in items("claims")),
            plots=(
                {str(k): str(v) for k, v in plots.items() if v}
                if isinstance(plots, Mapping)
                else None
            ),
            timing=d.get("timing"),
            link_probe=part("link_probe") or None,
            projection=part("projection") or None,
            load=part("load") or None,
        )

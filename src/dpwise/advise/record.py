"""`dpwise advise`'s answer as a record (its --json document's shape), read by its text and its
job scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from dpwise.advise.estimate import StrategyEstimate


class Projected(TypedDict):
    devices: int
    points: list[Any]  # projection.cite's points, as results.json holds them


class Answer(TypedDict, total=False):
    """`dpwise advise`'s answer (its --json document; advise.text says it): the rules'
    Recommendation's fields, then what it was weighed on."""

    strategy: str
    rule: str
    reasons: list[str]
    runner_up: str | None
    changes: list[str]
    launch: list[str]
    world_size: int
    measurement_status: str | None
    inconclusive_reason: str | None
    warnings: list[str]
    projection: Projected | None
    measured: bool
    memory: dict[str, StrategyEstimate] | None
    # --simulate: each simulated strategy's busiest rank (advise.simulate.Simulated as JSON),
    # the formula's figure beside it and how far off it is (a share of the simulated figure)
    simulated: dict[str, dict[str, Any]] | None
    model: dict[str, Any] | None  # ModelFacts as JSON
    facts: dict[str, dict[str, Any]]  # each Fact as JSON: value, source, note
    job: dict[str, Any]  # added by the command when it writes a job script

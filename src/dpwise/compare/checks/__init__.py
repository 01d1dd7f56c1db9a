"""The guide's validation checks: one module per check, each a Check (a CheckContext in, a
CheckResult out). ``CHECKS`` is the one ordered registry compare runs and the report shows.
No measuring here."""

from dpwise.compare.checks.base import Check, CheckContext, Diagnosis
from dpwise.compare.checks.communication import COMMUNICATION
from dpwise.compare.checks.convergence import CONVERGENCE, explain_divergence
from dpwise.compare.checks.memory import MEMORY
from dpwise.compare.checks.scalability import SCALABILITY
from dpwise.compare.checks.speed import SPEED

CHECKS: tuple[Check, ...] = (CONVERGENCE, MEMORY, SPEED, COMMUNICATION, SCALABILITY)

__all__ = [
    "CHECKS",
    "COMMUNICATION",
    "CONVERGENCE",
    "MEMORY",
    "SCALABILITY",
    "SPEED",
    "Check",
    "CheckContext",
    "Diagnosis",
    "explain_divergence",
]

"""The guide's validation checks: one module per check, each a Check (a CheckContext in, a
CheckResult out). ``CHECKS`` is the one ordered registry compare runs and the report shows.
No measuring here."""

from dpwise.checks.base import Check, CheckContext, CheckResult, Diagnosis
from dpwise.checks.communication import COMMUNICATION
from dpwise.checks.convergence import CONVERGENCE, explain_divergence
from dpwise.checks.memory import MEMORY
from dpwise.checks.scalability import SCALABILITY
from dpwise.checks.speed import SPEED

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
    "CheckResult",
    "Diagnosis",
    "explain_divergence",
]

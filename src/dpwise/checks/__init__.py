"""The guide's five validation checks: measurements in, CheckResult out. No measuring here."""

from dpwise.checks.base import CheckResult, Diagnosis
from dpwise.checks.communication import communication
from dpwise.checks.convergence import convergence, explain_divergence
from dpwise.checks.memory import memory
from dpwise.checks.performance import scalability, speed

__all__ = [
    "CheckResult",
    "Diagnosis",
    "communication",
    "convergence",
    "explain_divergence",
    "memory",
    "scalability",
    "speed",
]

"""Owns: the guide's validation checks, one module per check (a CheckContext in, a CheckResult
out), their shared comparisons (base.py) and thresholds; CHECKS, the one ordered registry.
May import: results, diagnosis, measure, strategies, train (finiteness), infra; no measuring here.
Imported by: compare (runner, results, verdict) and nothing outside it.
"""

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

"""Owns: the guide's validation checks, one module per check (a CheckContext in, a finding out:
data, no prose), their sentences (text.py), shared comparisons (base.py) and thresholds; CHECKS,
the one ordered registry.
May import: results, diagnosis, measure, strategies, train (finiteness), infra; no measuring here.
Imported by: compare (runner, results, verdict) and nothing outside it.
"""

from dpwise.compare.checks import communication, convergence, memory, scalability, speed, text
from dpwise.compare.checks.base import Check, CheckContext, Diagnosis, Finding, Said
from dpwise.compare.checks.text import explain_divergence

CONVERGENCE = Check(convergence.NAME, convergence.find, text.convergence)
MEMORY = Check(memory.NAME, memory.find, text.memory)
SPEED = Check(speed.NAME, speed.find, text.speed)
COMMUNICATION = Check(communication.NAME, communication.find, text.communication)
SCALABILITY = Check(scalability.NAME, scalability.find, text.scalability)

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
    "Finding",
    "Said",
    "explain_divergence",
]

"""Owns: `dpwise probe-link`: collectives timed over message sizes in a process group, the ring
model's fit, its settings, its worker and its text.
May import: train, strategies, launch, measure, infra, errors
Imported by: commands, compare, report

The link probe: collectives timed over message sizes, bandwidths and a latency/bandwidth fit.

``probe_link`` (dpwise.link.probe) measures inside an initialised process group; the arithmetic
and the fit (dpwise.link.fit) are pure functions.
"""

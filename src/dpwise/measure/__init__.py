"""Owns: measurement probes: memory peaks, the profiler's collectives and DDP's buckets, timing
statistics, how far two trained states are apart, the rows and digests of each optimizer step
(meter), a rank's state under `dpwise watch` (rankwatch); data out, nothing printed.
May import: infra, errors
Imported by: advise, compare, link, train, tune, userscript
"""

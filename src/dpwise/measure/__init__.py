"""Owns: measurement probes: memory peaks, the profiler's collectives and DDP's buckets, timing
statistics, how far two trained states are apart; data out, nothing printed.
May import: infra, errors
Imported by: advise, compare, link, train, tune, userscript
"""

"""Owns: measurement probes: memory peaks, the profiler's collectives and DDP's buckets, timing
statistics; data out, nothing printed.
May import: infra, errors
Imported by: advise, compare, link, train
"""

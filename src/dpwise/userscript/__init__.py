"""Owns: running a user's training script unedited: its command line (command) and how it
launches (kind), one launch and why it ended (run), the harness each of its processes runs (the
seed, the sampler's order, the optimizer-step hooks that stop it and save its parameters, the
workers it spawns), the CPU's stand-in for CUDA (standin), what each rank measures (probe; its
rows: measure.meter), what in its model makes parallel runs differ (causes), and a script run
under `dpwise watch` (watcher: each rank with measure.rankwatch beside it).
May import: lint, launch, measure, diagnosis, infra, errors
Imported by: compare (--script), commands, migrate (--verify), watch

A script runs as its user runs it: its own loop, optimizer, scheduler and data. dpwise changes
the conditions around it (the environment, torch's hooks), never its text.
"""

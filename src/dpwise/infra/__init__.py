"""Owns: what every room stands on: settings declared once, units, atomic writes, new files (never
over anything), the --out lock and whose results an --out holds, interrupts, the hardware probe,
the environment report.
May import: errors (and the package's version)
Imported by: advise, cli, commands, compare, launch, link, lint, measure, migrate, projection,
report, train, tune, watch, workload
"""

"""`dpwise lint`: find data-parallel pitfalls in training scripts, statically (see dpwise.lint)."""

from __future__ import annotations

from dpwise.lint.command import DESCRIPTION, EPILOG, HELP, add_arguments, run

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "add_arguments", "run"]

"""dpwise.lint.analysis.context."""

"""dpwise.lint.fix."""

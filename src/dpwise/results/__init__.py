"""dpwise.results."""

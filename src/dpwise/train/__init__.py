"""dpwise.train."""

"""dpwise.dist."""

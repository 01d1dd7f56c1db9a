"""dpwise.infra."""

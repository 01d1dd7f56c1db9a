"""dpwise.workload.spec."""

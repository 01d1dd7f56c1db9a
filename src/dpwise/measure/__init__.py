"""Measurement probes: pure data out, nothing printed."""

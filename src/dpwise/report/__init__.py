"""Rendering: results in, text out. Nothing here measures."""

"""Owns: the compare report only: the view, Markdown, HTML (templates/), the plots, the terminal
summary; results in, text out, nothing measured.
May import: link, results, strategies, infra
Imported by: compare, tune
"""

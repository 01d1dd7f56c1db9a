"""Owns: what a rule's fix is made of: text edits and their positions (edits.py), LibCST rewrites
of one call or dict (cst.py). The loop that applies fixes and writes files is lint/fixer.py.
May import: lint.model.
Imported by: the rules, the analysis (a file's text), the checker, the fix loop, migrate.
"""

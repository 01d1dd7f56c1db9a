"""Owns: what lint knows of a program: names and their imports, the file's index and context, call
flow, rank guards, loaders and samplers, wrappers, and the project view across modules.
May import: lint.model, lint.files, lint.fix (the text of a file); never a rule.
Imported by: the rules, the checker, the fix loop, migrate's facts.
"""

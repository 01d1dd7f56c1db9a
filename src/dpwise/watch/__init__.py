"""Owns: `dpwise watch` and `dpwise diagnose`: a user's job run unedited with a watcher in every
rank (userscript.watcher), its ranks' states read live (state), a hang found and named from the
ranks' collectives and stacks (match), the folder a watch leaves and diagnose reads (folder),
the session and its text.
May import: userscript, lint, launch, infra, errors
Imported by: commands
"""

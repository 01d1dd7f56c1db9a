"""DPW000 syntax-error: a file Python cannot parse or decode. The checker reports it (no check
of its own here); it stays on under --select unless ignored."""

from __future__ import annotations

from dpwise.lint.model import Rule

RULE = Rule(
    code="DPW000",
    name="syntax-error",
    severity="error",
    summary="the file cannot be parsed (or decoded) as Python",
    message="syntax error",
    help="fix the syntax error; no other rule can check this file until it parses",
    docs="""\
## What it does
Reports a file that Python cannot parse (or decode), with the parser's message and position. The
other files are still checked. Reported even under `--select`, unless ignored by name or code.

## Why is this bad?
A training script that does not parse fails on every rank at start-up, and no other rule can look
at it.

## Example
```python
for epoch in range(10)
    train(epoch)
```

## Use instead
```python
for epoch in range(10):
    train(epoch)
```
""",
)

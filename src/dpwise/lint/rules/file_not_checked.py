"""DPW016 file-not-checked: a file dpwise did not check (too large, or nested too deeply), so that
a skipped file is never mistaken for a clean one. The checker reports it (no check of its own
here); it stays on under --select unless ignored."""

from __future__ import annotations

from dpwise.lint.files import MAX_FILE_BYTES
from dpwise.lint.model import Rule

RULE = Rule(
    code="DPW016",
    name="file-not-checked",
    severity="warning",
    summary="the file was not checked: too large, or nested too deeply to analyse",
    message="file not checked",
    help="split the file into smaller modules or flatten the nesting; no rule checked this file",
    docs=f"""\
## What it does
Reports a file that dpwise did not check, so that a skipped file is never mistaken for a clean
one: a file over {MAX_FILE_BYTES // 2**20} MiB (never read, which bounds the cost of one file),
and a file whose expressions are nested so deeply (thousands of levels) that parsing or analysing it
exhausts the recursion limit or memory. The other files are still checked. Reported even under
`--select`, unless ignored by name or code.

## Why is this bad?
No rule looked at the file. A file nested that deeply usually cannot be compiled by Python
either; a file that large is usually generated code or data, not a training script.

## Example
```python
x = ----------------------------------------------------------------------------------1  # × 5,000
```

## Use instead
```python
x = 1
```
""",
)

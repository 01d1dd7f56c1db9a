"""Generate the home page's command table when the site is built (mkdocs-gen-files runs this).

The table is the CLI's own command list (`dpwise.cli.COMMANDS`, in its order): each command's
first sentence of `dpwise COMMAND --help` and its page, `COMMAND.md`. A command added to the CLI
gets its row at the next build; a command without a page fails the build.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import mkdocs_gen_files

from dpwise.cli import COMMANDS

PAGE = "index.md"
MARK = "<!-- the command table: generated from dpwise.cli.COMMANDS (docs/gen_command_table.py) -->"
EXTRA_PAGES = {"lint": "[rules](rules/index.md)"}  # pages beside the command's own
FIRST_SENTENCE = re.compile(r"^(.+?[.])(?:\s+(?=[A-Z`])|\s*$)", re.DOTALL)


def summary(name: str) -> str:
    """The first sentence of the command's --help description, on one line."""
    module = importlib.import_module(f"dpwise.commands.{name.replace('-', '_')}")
    text = " ".join(str(module.DESCRIPTION).split())
    match = FIRST_SENTENCE.match(text)
    return (match.group(1) if match else text).replace("|", "\\|")


def table(docs_dir: Path) -> str:
    rows = ["| command | what it does | page |", "|---|---|---|"]
    for name in COMMANDS:
        if not (docs_dir / f"{name}.md").is_file():
            raise SystemExit(f"docs/{name}.md is missing: every command of the CLI has a page")
        pages = ", ".join([f"[{name}]({name}.md)", *filter(None, [EXTRA_PAGES.get(name)])])
        rows.append(f"| `dpwise {name}` | {summary(name)} | {pages} |")
    return "\n".join(rows)


def generate() -> None:
    docs_dir = Path(mkdocs_gen_files.config.docs_dir)
    with mkdocs_gen_files.open(PAGE, "r") as f:
        text = f.read()
    if MARK not in text:
        raise SystemExit(f"docs/{PAGE}: the marker {MARK!r} is missing")
    with mkdocs_gen_files.open(PAGE, "w") as f:
        f.write(text.replace(MARK, table(docs_dir)))


generate()

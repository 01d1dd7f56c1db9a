"""The front door lists the CLI's own commands: the README by hand (held here), the docs' home
page generated from the same list (docs/gen_command_table.py)."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

from dpwise.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_lists_exactly_the_clis_commands():
    text = (ROOT / "README.md").read_text()
    listed = re.findall(r"^- `dpwise ([a-z-]+)` —", text, flags=re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS), f"README lists {listed}, the CLI has {COMMANDS}"


def test_the_home_pages_table_has_one_row_per_command_with_its_help_and_page(monkeypatch, tmp_path):
    """The generator run as mkdocs-gen-files runs it, on a stand-in for its file editor."""
    docs = ROOT / "docs"
    written: dict[str, str] = {}

    class Editor:
        class config:  # the attribute mkdocs_gen_files exposes
            docs_dir = str(docs)

        @staticmethod
        def open(name, mode):
            if "w" in mode:
                out = tmp_path / name
                written[name] = str(out)
                return open(out, mode)
            return open(docs / name, mode)

    monkeypatch.setitem(sys.modules, "mkdocs_gen_files", Editor)
    runpy.run_path(str(docs / "gen_command_table.py"))
    page = Path(written["index.md"]).read_text()
    rows = re.findall(r"^\| `dpwise ([a-z-]+)` \| (.+?) \| (.+) \|$", page, flags=re.MULTILINE)
    assert [name for name, _, _ in rows] == list(COMMANDS)
    for name, what, pages in rows:
        assert f"({name}.md)" in pages and (docs / f"{name}.md").is_file()
        assert what.endswith(".") and len(what) > 20
    assert "generated from dpwise.cli.COMMANDS" not in page.split("## The commands")[1][:200]

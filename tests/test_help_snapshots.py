"""`dpwise <command> --help` prints what it printed when the snapshots in fixtures/help/ were
taken (before the modules moved into rooms, at 4493df2): flags, defaults, help, examples. A change
to a command's help is a change users see; update its snapshot in the same commit, on purpose."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dpwise.cli import COMMANDS, build_parser

SNAPSHOTS = Path(__file__).parent / "fixtures" / "help"

# argparse's layout changes between Python versions (3.13 writes "-o, --out OUT"); the
# snapshots were taken with the Python the project's CI runs.
pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="help snapshots are of Python 3.11's argparse"
)


def _help(command: str | None) -> str:
    parser = build_parser()
    if command is not None:
        parser = next(a for a in parser._actions if a.dest == "command").choices[command]
    return parser.format_help()


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_what_it_was(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    want = (SNAPSHOTS / f"{command or 'dpwise'}.txt").read_text()
    assert _help(command) == want

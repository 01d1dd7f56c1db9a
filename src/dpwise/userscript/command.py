"""A user's command line, as they type it today, read into what to run: the script, its own
arguments, and how it is launched (`torchrun …`, `python -m torch.distributed.run …`,
`python train.py …`, or a bare path whose launch the script itself decides: kind.py).

Nothing runs here. torchrun's options are read by torchrun's own parser
(`torch.distributed.run.get_args_parser`), so every spelling it takes is taken.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from dpwise.errors import DpwiseError

Launcher = Literal["torchrun", "python", "path"]
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# the interpreter's options before the script: those that take no value, and those that take one
_PY_FLAGS = frozenset({"-u", "-O", "-OO", "-B", "-E", "-s", "-S", "-I", "-q", "-b", "-bb", "-d"})
_PY_VALUED = frozenset({"-W", "-X"})


@dataclass(frozen=True)
class ScriptCommand:
    """One `--script CMD`: the command as given, the script file it runs (resolved against the
    working folder), the script's own arguments, how it was launched, the process count torchrun
    was given (None: not given, or not a number), and the variables set before it
    (`A=1 python …`)."""

    given: str
    script: Path
    args: tuple[str, ...] = ()
    launcher: Launcher = "path"
    nproc: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = field(default_factory=Path.cwd)  # the folder the command runs in
    per_node: str = ""  # torchrun's --nproc_per_node as given ("4", "gpu", "auto"; "": not given)

    @property
    def name(self) -> str:
        """The run's name in the report: the script's file name without `.py`."""
        return self.script.stem


def parse(given: str, cwd: Path | None = None, asked: str = "--script") -> ScriptCommand:
    """The command line ``given`` read into a ScriptCommand; a one-line DpwiseError for one that
    does not parse, names a script that does not exist, or runs something other than a script.
    ``asked``: how the user gave it, as the error names it (`--script`, compare's flag; watch's
    command after `--`)."""
    try:
        return _parse(given, cwd)
    except DpwiseError as exc:
        if asked == "--script":
            raise
        said = str(exc).replace(f"--script {given!r}", f"{asked} {given!r}", 1)
        said = said.replace("compare runs", "dpwise runs").replace(_SIZES, "")
        raise DpwiseError(said) from None


_SIZES = " and the process counts with --world-sizes"


def _parse(given: str, cwd: Path | None) -> ScriptCommand:
    try:
        words = shlex.split(given)
    except ValueError as exc:
        raise DpwiseError(
            f"--script {given!r} does not parse as a command line ({exc}): quote it as your shell "
            "would, one string per command"
        ) from None
    env: dict[str, str] = {}
    while words and _ENV.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise DpwiseError(
            f"--script {given!r} names no command: give the line you run, e.g. "
            "'python train.py --epochs 1' or 'torchrun --nproc_per_node=2 train.py'"
        )
    first = os.path.basename(words[0])
    if first == "torchrun":
        return _torchrun(given, words[1:], env, cwd)
    if _PYTHON.match(first):
        rest = _after_python_options(given, words[1:])
        if rest[:1] == ["-m"]:
            module = rest[1] if len(rest) > 1 else ""
            if module in TORCHRUN_MODULES:
                return _torchrun(given, rest[2:], env, cwd)
            raise DpwiseError(_not_a_file(given, f"python -m {module}".strip()))
        if not rest or rest[0].startswith("-"):
            raise DpwiseError(_not_a_file(given, f"python {' '.join(rest[:1])}".strip()))
        return _script(given, rest[0], rest[1:], "python", None, env, cwd)
    return _script(given, words[0], words[1:], "path", None, env, cwd)


def _after_python_options(given: str, words: list[str]) -> list[str]:
    rest = list(words)
    while rest and rest[0] in _PY_FLAGS | _PY_VALUED:
        option = rest.pop(0)
        if option in _PY_VALUED:
            if not rest:
                raise DpwiseError(f"--script {given!r}: python's {option} needs a value")
            rest.pop(0)
    return rest


def _not_a_file(given: str, what: str) -> str:
    return (
        f"--script {given!r} runs {what!r}, not a script file: give the path of the file it runs "
        "(compare runs a script by its path, in its own folder)"
    )


def _torchrun(given: str, words: list[str], env: dict[str, str], cwd: Path | None
              ) -> ScriptCommand:  # fmt: skip
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()

    def refuse(message: str) -> None:
        raise DpwiseError(f"--script {given!r}: torchrun does not take it: {message}")

    parser.error = refuse  # type: ignore[method-assign,assignment]  # one line, not a usage and exit
    options = parser.parse_args(words)
    if options.module or options.no_python:
        flag = "-m" if options.module else "--no-python"
        raise DpwiseError(_not_a_file(given, f"torchrun {flag} {options.training_script}"))
    if str(options.nnodes) not in ("1", "1:1"):
        raise DpwiseError(
            f"--script {given!r}: --nnodes {options.nnodes}: compare runs on one node; give "
            f"--nnodes 1 (or leave it out){_SIZES}"
        )
    count = str(options.nproc_per_node)
    nproc = int(count) if count.isdigit() else None
    found = _script(
        given, options.training_script, options.training_script_args, "torchrun", nproc, env, cwd
    )
    return replace(found, per_node=count)


def _script(
    given: str,
    path: str,
    args: list[str],
    launcher: Launcher,
    nproc: int | None,
    env: dict[str, str],
    cwd: Path | None,
) -> ScriptCommand:
    script = (cwd or Path.cwd()) / os.path.expanduser(path)
    if not script.is_file():
        what = "is a folder" if script.is_dir() else "does not exist"
        raise DpwiseError(f"--script {given!r}: {path} {what}: give the path of a training script")
    return ScriptCommand(
        given, script.resolve(), tuple(args), launcher, nproc, env, (cwd or Path.cwd()).resolve()
    )

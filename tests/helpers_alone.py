"""Run a script as `python script.py ARGS` would, in a process forked from dpwise's fork server
(which has imported torch already: a fresh interpreter would import it again, seconds of a core)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _alone(script: str, args: list[str], blocked: list[str], stderr: str | None) -> None:
    """`python script ARGS`: no torchrun, one process, as `__main__` from its own folder with its
    own argv; the modules in ``blocked`` cannot be imported (as if not installed); its stderr
    (file descriptor 2) goes to ``stderr`` where given."""
    import runpy

    from dpwise.infra.interrupts import release

    release()  # the server holds Ctrl-C for the processes it forks until they are ready
    folder = os.path.dirname(script)
    os.chdir(folder)
    os.environ["DPWISE_OUT"] = os.path.join(folder, "weights.pt")
    for name in [m for m in sys.modules if m.split(".")[0] in blocked]:
        del sys.modules[name]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    if stderr:
        with open(stderr, "w") as fh:
            os.dup2(fh.fileno(), 2)
    sys.argv, sys.path[0] = [script, *args], folder
    runpy.run_path(script, run_name="__main__")


def run_alone(
    script: Path, *args: str, blocked: tuple[str, ...] = (), stderr: Path | None = None
) -> int | None:
    """The exit code of `python script ARGS` (see ``_alone``), run in a forked process."""
    from dpwise.launch import forking

    ctx = forking.context()
    forking.ensure_running()
    child = ctx.Process(
        target=forking.AsParent(_alone),
        args=(str(script), list(args), list(blocked), str(stderr) if stderr else None),
    )
    child.start()
    child.join(300)
    return child.exitcode

"""One launch of a user's script, unedited, on dpwise's launcher (torch's elastic agent, as
torchrun runs it): each worker runs the harness, which runs the script; and, when it ends without
what the harness saves, why, in one line (the harness's own word, the time limit, the error a
worker raised, the last line a worker printed). `migrate --verify` runs both its scripts through
it."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from dpwise.launch.elastic import PeerStopped, WorkerFailed, launch
from dpwise.launch.settings import LaunchSettings
from dpwise.userscript import stacks
from dpwise.userscript.harness import ENDED, FAILED, LIMIT_MARK, LOG, MAIN_LOG, MARK, worker
from dpwise.userscript.standin import DEVICES, PORT

if TYPE_CHECKING:
    from dpwise.userscript.kind import Kind


def launch_script(
    script: Path,
    args: list[str],
    home: Path,
    out: Path,
    steps: int,
    nproc: int,
    timeout: float,
    measure: bool = False,
    devices: int = 1,
    seed: int = 0,
    cwd: Path | None = None,
    profile: tuple[int, int] | None = None,
    kind: Kind = "torchrun",
    visible: str = "",
    fewer: str | None = None,
    read: int | None = None,
) -> None:
    """One launch of `script` on ``nproc`` workers through dpwise's launcher (torch's elastic
    agent, as torchrun runs it), in the folder of `out` (so that what the script writes stays
    out of the user's folder), importing its siblings from `home`; ``measure``: each rank also
    writes what it measured beside `out` (harness.MEASURED); ``devices``: the GPUs the script sees
    (on the CPU, what the stand-in answers for `torch.cuda.device_count()`: standin); ``seed``:
    set before the script runs; ``cwd``: the folder it runs in (default: the folder of `out`);
    ``profile`` (W, P): with it, the profiler's figures over steps W+1 to W+P (probe); ``kind``:
    how the script starts (userscript.kind): one not run under torchrun ("spawns": one process,
    which starts its own) does not see the launcher's variables, and its process group meets on
    a port of its own; ``visible``: the GPUs it may use (CUDA_VISIBLE_DEVICES: "" the CPU and
    gloo, as --verify runs; "0,1" the first two); ``fewer``: "FLAG UNTIMED", what a script that
    ended too early is told to lower (harness: DPWISE_SCRIPT_FEWER); ``read``: with ``measure``,
    the rows of the first ``read`` steps are read for their digests and row sets (None: every
    step's; compare reads them in its untimed steps only)."""
    env = {
        "CUDA_VISIBLE_DEVICES": visible,
        "DPWISE_SCRIPT_AS": str(home / script.name),
        "DPWISE_SCRIPT_STEPS": str(steps),
        "DPWISE_SCRIPT_OUT": str(out),
        "DPWISE_SCRIPT_PATH": str(home),
        "DPWISE_SCRIPT_KIND": kind,
        DEVICES: str(devices),
        "DPWISE_SCRIPT_SEED": str(seed),
        **_optional(cwd, kind, fewer, measure, profile, nproc, read),
    }
    settings = LaunchSettings(nproc_per_node=nproc, timeout=timeout)
    try:
        launch(settings, worker, [str(script), *args], timeout, env=env)
    except PeerStopped as stopped:  # its process stopped (SIGSTOP): the launcher names it
        raise ScriptFailed(f"did not end{_under(kind)}: {stopped}") from None
    except WorkerFailed as failed:
        said = why_ended(out.parent, steps, timeout, failed, script, kind)
        raise _failed(out.parent, said) from None
    if not out.exists():
        raise _failed(out.parent, why_ended(out.parent, steps, timeout, None, script, kind))


def _optional(
    cwd: Path | None,
    kind: Kind,
    fewer: str | None,
    measure: bool,
    profile: tuple[int, int] | None,
    nproc: int,
    read: int | None = None,
) -> dict[str, str]:
    """The harness's variables that only some launches set (launch_script says what each is)."""
    env = {}
    if cwd is not None:
        env["DPWISE_SCRIPT_CWD"] = str(cwd)
    if kind != "torchrun":  # torchrun's workers meet on the launcher's own port
        env[PORT] = str(_free_port())
    if fewer is not None:
        env["DPWISE_SCRIPT_FEWER"] = fewer
    if measure:
        env["DPWISE_SCRIPT_MEASURE"] = "1"
    if measure and read is not None:
        env["DPWISE_SCRIPT_READ"] = str(read)
    if measure and profile is not None:
        env["DPWISE_SCRIPT_PROFILE"] = f"{profile[0]},{profile[1]}"
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = "1"  # what torchrun gives each of several workers
    return env


def _free_port() -> int:
    """A port free now on this machine (the kernel's pick), for a script's process group."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _under(kind: Kind) -> str:
    """How the failure lines name the launch: torchrun's workers are "under torchrun"; a script
    that runs as one process (which may start its own) is simply the run."""
    return " under torchrun" if kind == "torchrun" else ""


def _late(timeout: float, folder: Path, script: Path | None, kind: Kind) -> str:
    """The time limit ended the run: the process that went silent and the script's line where,
    with those that waited for it (their stacks, dumped in their logs), when the dumps say."""
    logs = {_who(log, kind): log for log in _logs(folder)}
    said = stacks.describe(stacks.stopped(logs, script.name)) if script is not None else ""
    return (
        f"did not end within {timeout:.0f} s{_under(kind)}: "
        f"{said or 'a worker stopped, hung or waits for input'}; run it by hand to see why"
    )


def _who(log: Path, kind: Kind) -> str:
    """The process a log is of, in the failure's words: "rank R"; a one-process script's "it";
    a spawning script's "its own process" (the ranks are the processes it started)."""
    if log.name == MAIN_LOG:
        return "its own process"
    if kind in ("single", "dataparallel"):
        return "it"
    return f"rank {log.name[len(LOG) : -len('.log')]}"


def why_ended(
    folder: Path,
    steps: int,
    timeout: float,
    failed: WorkerFailed | None,
    script: Path | None = None,
    kind: Kind = "torchrun",
) -> str:
    """Why a launch ended without its parameters: what the harness wrote when the script ended
    too early, the time limit, else the error the first failed worker raised (its traceback, as
    the launcher recorded it), else the last lines the workers printed. A process the script
    started itself that raised says so first: its rank, its error and the script's line."""
    failed_ranks = sorted(folder.glob(f"{FAILED}*"))
    if failed_ranks:
        said = failed_ranks[0].read_text(encoding="utf-8")
        return f"failed in a process it started ({said}); run it by hand to see why"
    ended = sorted(folder.glob(f"{ENDED}*"))
    if ended:
        why = ended[0].read_text(encoding="utf-8")
        rank = ended[0].name[len(ENDED) :]
        last = _last_words(folder / f"{LOG}{rank}.log")
        said = f" (its last line: {last})" if last and why.startswith("it exited") else ""
        return f"did not reach {steps} steps{_under(kind)}: {why}{said}"
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in _logs(folder)]
    if any(LIMIT_MARK in text for text in logs):
        return _late(timeout, folder, script, kind)
    if failed is not None and failed.details:
        return cause(failed.details, steps, where(failed, script), kind)
    words = [w for w in (_last_words(p) for p in _logs(folder)) if w]
    if failed is not None and words:  # os._exit, a signal: no Python error, but its own words
        return (
            f"failed{_under(kind)} (worker rank {failed.rank} exited with code "
            f"{failed.exitcode}; its last line: {words[0]}); run it by hand to see why"
        )
    return cause("\n".join(logs) + (f"\n{failed}" if failed else ""), steps, kind=kind)


def _logs(folder: Path) -> list[Path]:
    """The workers' logs: each rank's, and a "spawns" script's own process's last."""
    return [*sorted(folder.glob(f"{LOG}*")), *folder.glob(MAIN_LOG)]


def _last_words(log: Path) -> str:
    """The last line a worker printed that says something (no banner of asterisks or equals
    signs, no launcher log line), shortened."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if _says_something(line)]
    return lines[-1][:200] if lines else ""


def _says_something(line: str) -> bool:
    bare = line.strip()
    return bool(bare.strip("=*-_#~ ")) and not bare.startswith("torch.distributed.elastic")


class ScriptFailed(Exception):
    """A run that crashed or ended before its steps: what its output says, in one line."""


class ScriptRefused(ScriptFailed):
    """The script's own parser refused the arguments it was given (argparse's exit code 2 and
    its usage line, before any step): a mistake in the command line, not a failed run."""


def _failed(folder: Path, said: str) -> ScriptFailed:
    refused = refused_arguments(folder)
    return ScriptRefused(refused) if refused else ScriptFailed(said)


def refused_arguments(folder: Path) -> str:
    """ "refused its arguments (ERROR; usage: …)" when a process exited with code 2 before its
    first step and its log holds a parser's usage line and error (argparse's), else ""."""
    for ended in sorted(folder.glob(f"{ENDED}*")):
        if not ended.read_text(encoding="utf-8").startswith("it exited with code 2 after 0 "):
            continue
        rank = ended.name[len(ENDED) :]
        for log in (folder / f"{LOG}{rank}.log", folder / MAIN_LOG):
            try:
                lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            usage = _usage(lines)
            errors = [line.strip() for line in lines if ": error: " in line]
            if usage and errors:
                return f"refused its arguments ({errors[-1][:200]}; {usage})"
    return ""


def _usage(lines: list[str]) -> str:
    """argparse's usage line, its wrapped continuation lines joined (shortened)."""
    starts = [i for i, line in enumerate(lines) if line.startswith("usage: ")]
    if not starts:
        return ""
    words = [lines[starts[-1]].strip()]
    for line in lines[starts[-1] + 1 :]:
        if not line.startswith(" ") or not line.strip():
            break
        words.append(line.strip())
    usage = " ".join(words)
    return usage if len(usage) <= 200 else usage[:199] + "…"


def where(failed: WorkerFailed, script: Path | None) -> str:
    """ "rank R, NAME line N: ": the failed worker, and the script's last line in its traceback
    (the line of the script that raised, or that called what raised)."""
    lines = re.findall(r'File "([^"]+)", line (\d+)', failed.details or "")
    mine = [n for path, n in lines if script is not None and Path(path).name == script.name]
    at = f", {script.name} line {mine[-1]}" if mine and script is not None else ""
    return f"rank {failed.rank}{at}: "


def cause(stderr: str, steps: int, where: str = "", kind: Kind = "torchrun") -> str:
    """The harness's own line when the script ended too early, else the exception line of a
    worker's traceback (after ``where``: the rank and the script's line), else the last line
    that says something."""
    lines = [line.strip() for line in stderr.splitlines() if _says_something(line)]
    short = [part.strip() for line in lines if MARK in line for part in line.split(MARK)[1:]]
    if short:
        return f"did not reach {steps} steps{_under(kind)}: {short[-1]}"
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", line)]
    why = (errors or lines or ["no output"])[-1]
    return f"failed{_under(kind)} ({where}{why}); run it by hand to see why"

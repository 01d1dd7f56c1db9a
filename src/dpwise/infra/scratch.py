"""The temporary folders of a dpwise command: named after the command, removed when it ends, and
removed by the next command when a kill -9 left them.

A folder is ``dpwise-KIND-NS.PID-XXXXXXXX`` in the temporary folder: PID is the command's
process (``COMMAND_ENV``, which the command sets for every process it starts), NS its pid
namespace (so that a folder of a process in another container sharing /tmp, whose pid means
nothing here, is never taken for a dead one). A launched worker's folders sit inside its launch's
folder (``LAUNCH_DIR_ENV``), which the launch removes when its workers are gone: a worker killed
with kill -9 while the command goes on leaves nothing behind; so does one of compare's run
processes, whose leftovers compare removes once its runs have ended (``left_behind``). The
command's fork server removes the command's folders when the command dies without cleaning up
(dpwise.launch.forking); ``remove_stale`` removes those of commands no longer running (a
machine's reboot, a killed process tree).

What a command makes elsewhere for its own use (compare's staging folder inside --out, the
--out lock, an --out folder it created) is listed with ``own`` in the command's ``owned`` file
beside its folders, and removed with them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

COMMAND_ENV = "DPWISE_COMMAND_PID"  # the pid of the dpwise command a process belongs to
LAUNCH_DIR_ENV = "DPWISE_LAUNCH_DIR"  # a launch's own folder (launch.elastic), set in its workers
PREFIX = "dpwise-"


def mark_command() -> None:
    """This process is a dpwise command: the processes it starts belong to it."""
    os.environ[COMMAND_ENV] = str(os.getpid())


def command_pid() -> int:
    value = os.environ.get(COMMAND_ENV, "")
    return int(value) if value.isdigit() else os.getpid()


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _owner_tag(pid: int) -> str:
    return f"{_namespace()}.{pid}"


def temp_root() -> str:
    """The temporary folder (not a launch's own, which launch.elastic makes the process's
    temporary folder while its workers run)."""
    current = tempfile.gettempdir()
    if os.path.basename(current).startswith(f"{PREFIX}launch-"):
        return os.path.dirname(current)
    return current


def make(kind: str, base: str | None = None) -> Path:
    """A new folder for ``kind`` (launch, verify, trace …), owned by this command. A launched
    worker's goes inside its launch's folder: a worker killed before it removed its own folder
    leaves it there, and the launch's end takes it (the command's death too, as any of its)."""
    base = base or _launch_folder()
    remove_stale(base)
    prefix = f"{PREFIX}{kind}-{_owner_tag(command_pid())}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base or temp_root()))


def _launch_folder() -> str | None:
    folder = os.environ.get(LAUNCH_DIR_ENV)
    return folder if folder and os.path.isdir(folder) else None


@contextmanager
def folder(kind: str) -> Iterator[Path]:
    """``make``'s folder for the block; removed after it, whatever ends the block."""
    path = make(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_OWNED = "owned"  # the kind of the file that lists what a command made elsewhere
TREE, LOCK, EMPTY = "tree", "lock", "empty"  # how each listed path goes
_LISTS: list[Path] = []
LOCK_NAME = ".dpwise.lock"  # an --out's lock (infra.outlock)


def own(how: str, path: Path, upto: Path | None = None) -> None:
    """List ``path`` for removal if this command dies without removing it: TREE a folder and
    all in it, LOCK an --out lock file (if no live run holds it), EMPTY a folder (and its
    parents up to ``upto``) while empty."""
    line = "\t".join([how, str(Path(path).absolute()), str(upto or "")])
    listing = Path(temp_root()) / f"{PREFIX}{_OWNED}-{_owner_tag(command_pid())}-list"
    with open(listing, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    if listing not in _LISTS:  # a command that ends as it should removes what it made itself
        _LISTS.append(listing)
        atexit.register(listing.unlink, missing_ok=True)


def _owners(base: str | None) -> Iterator[tuple[Path, int]]:
    """(path, pid) for every folder (and ``owned`` list) of a command of this pid namespace."""
    root = Path(base or temp_root())
    own_ns = _namespace() + "."
    try:
        entries = list(root.glob(f"{PREFIX}*-{own_ns}*-*"))
    except OSError:
        return
    for entry in entries:
        tag = entry.name.split("-")[-2] if entry.name.count("-") >= 3 else ""
        ns, _, pid = tag.partition(".")
        if ns + "." == own_ns and pid.isdigit() and not entry.is_symlink():
            yield entry, int(pid)


def _remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
        return
    if entry.name.startswith(f"{PREFIX}{_OWNED}-"):
        _remove_listed(entry)
    entry.unlink(missing_ok=True)


def _remove_listed(listing: Path) -> None:
    try:
        lines = [line.split("\t") for line in listing.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError):
        return
    for how in (TREE, LOCK, EMPTY):  # what is inside a folder first, the folder last
        for kind, path, upto, *_ in (line for line in lines if len(line) >= 3):
            if kind != how:
                continue
            if how != LOCK and _in_use(Path(path)):
                continue  # another run took that --out since: its staging is its own now
            if how == TREE:
                shutil.rmtree(path, ignore_errors=True)
            elif how == LOCK:
                _remove_lock(Path(path))
            else:
                _remove_empty(Path(path), Path(upto) if upto else None)


def _in_use(path: Path) -> bool:
    """An --out lock beside or inside ``path`` is held by a live run."""
    return any(_held(lock) for lock in (path / LOCK_NAME, path.parent / LOCK_NAME))


def _remove_lock(path: Path) -> None:
    """Unlink a lock file nobody holds (a run that took it since must keep it)."""
    _held(path, then=lambda: path.unlink(missing_ok=True))


def _held(lock: Path, then: Callable[[], None] | None = None) -> bool:
    """Whether a live process holds ``lock`` (flock); when nobody does, ``then`` runs while this
    process holds it. A missing file, or no flock here, is not held."""
    try:
        import fcntl

        fd = os.open(lock, os.O_RDWR)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return True
    try:
        if then is not None:
            then()
    finally:
        os.close(fd)
    return False


def _remove_empty(folder: Path, upto: Path | None) -> None:
    for each in (folder, *folder.parents):
        try:
            each.rmdir()
        except OSError:
            return
        if upto is None or each == upto:
            return


def remove_of(pid: int, base: str | None = None) -> None:
    """Remove every folder of the command ``pid`` and what it listed (its fork server, once
    the command died)."""
    for entry, owner in _owners(base):
        if owner == pid:
            _remove(entry)


@contextmanager
def left_behind() -> Iterator[None]:
    """For a block that starts processes of this command and ends them all (compare's runs): the
    folders they made and left (a process killed with SIGKILL removes none of its own) are
    removed after the block. The command's folders from before the block stay."""
    before = set(_folders_of(command_pid()))
    try:
        yield
    finally:
        for entry in set(_folders_of(command_pid())) - before:
            shutil.rmtree(entry, ignore_errors=True)


def _folders_of(pid: int) -> Iterator[Path]:
    return (entry for entry, owner in _owners(None) if owner == pid and entry.is_dir())


def remove_stale(base: str | None = None) -> list[Path]:
    """Remove the folders (and listed paths) of commands that no longer run."""
    removed = []
    for entry, owner in _owners(base):
        if not alive(owner):
            _remove(entry)
            removed.append(entry)
    return removed


def alive(pid: int) -> bool:
    """A process with this pid runs (or is another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True

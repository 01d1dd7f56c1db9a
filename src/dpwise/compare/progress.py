"""Progress events from every process of a comparison, through one append-only file."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ProgressWriter:
    """Rank 0 of a run appends one JSON line per finished unit of work."""

    def __init__(self, path: Path, run_id: str, enabled: bool) -> None:
        self.path, self.run_id, self.enabled = path, run_id, enabled

    def emit(self, what: str, **fields: Any) -> None:
        if not self.enabled:
            return
        line = json.dumps({"run": self.run_id, "what": what, **fields})
        with open(self.path, "a") as fh:
            fh.write(line + "\n")


class ProgressTail:
    """Calls ``on_event`` for each line appended to the file, from a background thread."""

    def __init__(self, path: Path, on_event: Callable[[dict[str, Any]], None]) -> None:
        self.path, self.on_event = path, on_event
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._offset = 0

    def __enter__(self) -> ProgressTail:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._drain()
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._drain()

    def _drain(self) -> None:
        try:
            with open(self.path) as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind("\n") + 1]
        self._offset += len(complete.encode())
        for line in complete.splitlines():
            if line.strip():
                self.on_event(json.loads(line))

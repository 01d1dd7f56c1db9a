"""`dpwise probe-link`'s run: the probe launched (or run in this torchrun worker), and its JSON
written to --out by the node that holds global rank 0."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpwise.link.settings import ProbeLinkConfig
from dpwise.link.worker import run_probe
from dpwise.train.outputs import check_writable, write_json


@dataclass(frozen=True)
class Probed:
    result: dict[str, Any] | None  # None in a torchrun worker other than rank 0
    wrote: Path | None = None  # --out, when this process wrote it


def probe(cfg: ProbeLinkConfig) -> Probed:
    if cfg.out is not None:
        check_writable(cfg.out.parent)  # before anything is launched
    result, writer = run_probe(cfg, quiet=cfg.json)
    if result is None or cfg.out is None or not writer:
        return Probed(result)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(result, cfg.out)
    return Probed(result, cfg.out)

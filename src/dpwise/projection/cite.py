"""What `dpwise advise --from` says of a comparison's projection: a sentence per link cited,
recomputed at the device count asked for from the inputs and links results.json carries."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra.units import size
from dpwise.projection.links import PRESETS, Link, custom
from dpwise.projection.model import Bucket, Inputs, Point, fits, project_ddp

DEFAULT_DEVICES = 64  # the example scale, when neither --devices nor --gpus says
_URL = re.compile(r"https?://[^\s);,']+")


def _inputs(d: Mapping[str, Any]) -> Inputs:
    fields = {k: d[k] for k in Inputs.__dataclass_fields__ if k in d and k != "sharded"}
    fields["buckets"] = tuple(Bucket(int(b["bytes"]), float(b["ready_ms"])) for b in d["buckets"])
    return Inputs(**fields)


def _link(name: str, carried: dict[str, Link], flag: str) -> Link:
    if name in carried:
        return carried[name]
    if name in PRESETS:
        return PRESETS[name]
    if name == "probe":
        raise DpwiseError(f"{flag} probe: these results hold no link probe; name a preset")
    return custom(name, flag)


def _sentence(inputs: Inputs, link: Link, p: Point) -> str:
    grads = size(sum(b.bytes for b in inputs.buckets))
    if p.exposed_ms > 0.1 * p.step_ms:
        why = (
            f"the gradient all-reduce ({grads}) is not hidden behind backward: {p.exposed_ms:.3g} "
            f"ms of the {p.step_ms:.3g} ms step is exposed communication"
        )
    else:
        why = (
            f"the gradient all-reduce ({grads}) stays behind backward but for "
            f"{p.exposed_ms:.3g} ms of the {p.step_ms:.3g} ms step"
        )
    url = _URL.search(link.source)
    where = url.group(0) if url else link.source
    return (
        f"at {p.devices} devices over {link.label}, ddp keeps {p.efficiency:.0%} efficiency: "
        f"{why} (projection from {inputs.run}, link {link.name}: {link.basis}, {where})"
    )


def cite(
    section: Mapping[str, Any] | None, link: str | None, devices: int, flag: str = "--link"
) -> tuple[list[str], list[dict[str, Any]]]:
    """(sentences, points). Without ``link``: the first and the last link the projection used
    that reach ``devices`` (the range it spans)."""
    if not section:
        return ["no scaling projection in these results (made by an older dpwise)"], []
    if section.get("status") != "projected":
        return [f"no scaling projection: {section.get('reason', '')}"], []
    inputs = _inputs(section["inputs"])
    carried = {d["name"]: Link.from_json(d) for d in section.get("links", [])}
    if link is not None:
        chosen = [_link(link, carried, flag)]
        if not fits(chosen[0], devices):
            raise DpwiseError(
                f"{flag} {link} is a link within one node ({chosen[0].node_devices} devices at "
                f"most), not {devices}; give --devices {chosen[0].node_devices} or fewer, or an "
                "inter-node link"
            )
    else:
        reach = [x for x in carried.values() if fits(x, devices)]
        chosen = reach[:1] + reach[-1:] if len(reach) > 1 else reach
    points = [project_ddp(inputs, x, devices) for x in chosen]
    sentences = [_sentence(inputs, x, p) for x, p in zip(chosen, points, strict=True)]
    return sentences, [{"link": x.name, **p.to_json()} for x, p in zip(chosen, points, strict=True)]

"""Terminal text for `dpwise env`: one line per fact, then the GPUs and launcher variables."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpwise.infra.env_report import Environment


def render(info: Environment) -> str:
    facts: dict[str, object] = dict(info)
    lines = [f"{'dpwise':<22}{info['dpwise']}"]
    for key in (
        "python",
        "platform",
        "torch",
        "cuda",
        "cuda_available",
        "nccl_available",
        "nccl_version",
        "gloo_available",
        "peer_access_all_pairs",
        "cpu_cores",
        "cpu_count",
        "torch_threads",
    ):
        lines.append(f"{key:<22}{facts[key]}")
    lines.append(f"{'gpus':<22}{len(info['gpus'])}")
    for g in info["gpus"]:
        lines.append(
            f"  [{g['index']}] {g['name']}, {g['memory_bytes'] / 1024**3:.1f} GiB, "
            f"sm {g['capability']}"
        )
    lines.append(f"{'launcher variables':<22}{'none set' if not info['launcher_env'] else ''}")
    lines += [f"  {k}={v}" for k, v in info["launcher_env"].items()]
    return "\n".join(lines)

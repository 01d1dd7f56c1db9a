"""Terminal lines for `dpwise train`."""

from __future__ import annotations

from typing import Any

from dpwise.train.result import EpochReport

GIB = 1024**3


def epoch_line(report: EpochReport) -> str:
    return (
        f"epoch {report.epoch}/{report.epochs}  loss {report.mean_loss:.4f}  "
        f"{report.seconds:.2f} s  {report.samples_per_s:,.0f} samples/s"
    )


def node_line(endpoint: str, net: Any) -> str:
    """How this node joins a multi-node job: its address, interface and the store's place."""
    where = net.address or "an address the routing table did not give"
    via = f" on {net.interface}" if net.interface else ""
    store = {True: "this node hosts the c10d store", False: "another node hosts the c10d store"}
    role = store.get(net.is_host, "torch decides which node hosts the c10d store")
    return f"node: joins the rendezvous at {endpoint} from {where}{via}; {role}"


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    lines = [
        f"dpwise train: {metrics['strategy']} × {metrics['world_size']} process(es) on "
        f"{metrics['device']} (backend {metrics['backend'] or 'none'}), "
        f"{metrics['global_steps']} steps, final loss {_loss(metrics['final_loss'])}"
    ]
    for note in metrics["notes"]:
        lines.append(f"note: {note}")
    peaks = ", ".join(
        f"rank {m['rank']} {m['device']} {m['bytes'] / GIB:.3f} GiB" for m in metrics["peak_memory"]
    )
    hosts = {w.get("host") for w in metrics.get("workers", ())}
    if len(hosts) > 1 or any(w.get("address") for w in metrics.get("workers", ())):
        lines.append("workers: " + ", ".join(_worker(w) for w in metrics["workers"]))
    lines.append(f"peak memory ({metrics['peak_memory'][0]['kind']}): {peaks}")
    if metrics.get("out"):
        lines.append(f"wrote {metrics['out']}/final.pt and {metrics['out']}/metrics.json")
    else:
        lines.append("wrote nothing: give --out DIR to keep final.pt and metrics.json")
    return lines


def _loss(value: float | None) -> str:
    return "none (no step recorded)" if value is None else f"{value:.6f}"


def _worker(w: dict[str, Any]) -> str:
    """rank 0 on node-a (10.0.0.1): where each worker ran and the address its group used."""
    address = f" ({w['address']})" if w.get("address") else ""
    return f"rank {w['rank']} on {w.get('host', '?')}{address}"

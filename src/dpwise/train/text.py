"""Terminal lines for `dpwise train`."""

from __future__ import annotations

from typing import Any

from dpwise.train.result import EpochReport, Metrics, WorkerRecord

GIB = 1024**3


def epoch_line(report: EpochReport) -> str:
    return (
        f"epoch {report.epoch}/{report.epochs}  loss {report.mean_loss:.4f}  "
        f"{report.seconds:.2f} s  {report.samples_per_s:,.0f} samples/s"
    )


def node_line(endpoint: str | None, net: Any) -> str:
    """How this node joins a multi-node job: its address, interface and the store's place."""
    where = net.address or "an address the routing table did not give"
    via = f" on {net.interface}" if net.interface else ""
    store = {True: "this node hosts the c10d store", False: "another node hosts the c10d store"}
    role = store.get(net.is_host, "torch decides which node hosts the c10d store")
    return f"node: joins the rendezvous at {endpoint} from {where}{via}; {role}"


def summary_lines(metrics: Metrics) -> list[str]:
    r = metrics.result
    lines = [
        f"dpwise train: {r.strategy} × {r.world_size} process(es) on "
        f"{r.device} (backend {r.backend or 'none'}), "
        f"{r.global_steps} steps, final loss {_loss(r.final_loss)}"
    ]
    for note in r.notes:
        lines.append(f"note: {note}")
    peaks = ", ".join(
        f"rank {m['rank']} {m['device']} {m['bytes'] / GIB:.3f} GiB" for m in r.peak_memory
    )
    hosts = {w["host"] for w in r.workers}
    if len(hosts) > 1 or any(w["address"] for w in r.workers):
        lines.append("workers: " + ", ".join(_worker(w) for w in r.workers))
    lines.append(f"peak memory ({r.peak_memory[0]['kind']}): {peaks}")
    if metrics.out:
        lines.append(f"wrote {metrics.out}/final.pt and {metrics.out}/metrics.json")
    else:
        lines.append("wrote nothing: give --out DIR to keep final.pt and metrics.json")
    return lines


def _loss(value: float | None) -> str:
    return "none (no step recorded)" if value is None else f"{value:.6f}"


def _worker(w: WorkerRecord) -> str:
    """rank 0 on node-a (10.0.0.1): where each worker ran and the address its group used."""
    address = f" ({w['address']})" if w["address"] else ""
    return f"rank {w['rank']} on {w['host']}{address}"

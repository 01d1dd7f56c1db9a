"""SkyPilot: one task per node, with the node's rank, the nodes' addresses (the head's first)
and the GPUs per node; dpwise launches the node's workers."""

from __future__ import annotations

from collections.abc import Mapping

from dpwise.errors import DpwiseError
from dpwise.launch.cluster.found import Found, Sourced, first_integer, job_port, master


def detect(env: Mapping[str, str]) -> Found | None:
    if "SKYPILOT_NODE_RANK" not in env:
        return None
    rank = first_integer(env, ("SKYPILOT_NODE_RANK",))
    ips = [line.strip() for line in env.get("SKYPILOT_NODE_IPS", "").splitlines() if line.strip()]
    nnodes = first_integer(env, ("SKYPILOT_NUM_NODES",), 1) or Sourced(
        len(ips) or 1, "SKYPILOT_NODE_IPS"
    )
    assert rank is not None
    if rank.value >= nnodes.value or (ips and len(ips) != nnodes.value):
        raise DpwiseError(
            f"environment variables SKYPILOT_NODE_RANK={rank.value}, "
            f"SKYPILOT_NUM_NODES={nnodes.value} and SKYPILOT_NODE_IPS ({len(ips)} address(es)) "
            "disagree"
        )
    gpus = first_integer(env, ("SKYPILOT_NUM_GPUS_PER_NODE",))
    task = env.get("SKYPILOT_TASK_ID")
    host, port = master(env)
    if host is None and ips:
        host = Sourced(ips[0], "first address of SKYPILOT_NODE_IPS")
    if host is None and nnodes.value > 1:
        raise DpwiseError(
            f"SKYPILOT_NUM_NODES={nnodes.value} but SKYPILOT_NODE_IPS is empty: dpwise cannot "
            "tell where the nodes meet"
        )
    if port is None:
        port = job_port(task, "SKYPILOT_TASK_ID") if task else Sourced(29500, "torch's default")
    return Found(
        scheduler="skypilot", job="SkyPilot task" + (f" {task}" if task else ""),
        per_device=False, nnodes=nnodes, node_rank=rank,
        nproc=gpus if gpus is not None and gpus.value > 0 else None,
        host=host, port=port, rdzv_id=Sourced(task, "SKYPILOT_TASK_ID") if task else None,
    )  # fmt: skip

"""A launcher's worker: torchrun or TorchX (their elastic agent: ``TORCHELASTIC_RUN_ID`` with a
rank), or a launcher that sets ``LOCAL_RANK`` and ``WORLD_SIZE`` (torch.distributed.launch,
DeepSpeed's). Its process is one worker already; ``TORCHELASTIC_RUN_ID`` alone is a leftover."""

from __future__ import annotations

from collections.abc import Mapping

from dpwise.launch.cluster.found import Found, Sourced, first_integer, master

_UNNAMED = "a launcher's worker (LOCAL_RANK, WORLD_SIZE set)"  # no TORCHELASTIC_RUN_ID


def is_worker(env: Mapping[str, str]) -> bool:
    ranked = "RANK" in env or "LOCAL_RANK" in env
    launched = "LOCAL_RANK" in env and "WORLD_SIZE" in env
    return ("TORCHELASTIC_RUN_ID" in env and ranked) or launched


def detect(env: Mapping[str, str]) -> Found | None:
    if not is_worker(env):
        return None
    world = first_integer(env, ("WORLD_SIZE",), 1) or Sourced(1, "WORLD_SIZE unset")
    local_world = first_integer(env, ("LOCAL_WORLD_SIZE",), 1) or Sourced(
        world.value, "WORLD_SIZE (LOCAL_WORLD_SIZE unset)"
    )
    run_id = env.get("TORCHELASTIC_RUN_ID")
    host, port = master(env)
    return Found(
        scheduler="torchrun",
        job=f"torchrun run {run_id}" if run_id else _UNNAMED,
        per_device=True,
        nnodes=Sourced(max(1, world.value // local_world.value), "WORLD_SIZE ÷ LOCAL_WORLD_SIZE"),
        node_rank=first_integer(env, ("GROUP_RANK",)) or Sourced(0, "GROUP_RANK unset"),
        nproc=local_world,
        rank=first_integer(env, ("RANK",)) or Sourced(0, "RANK unset"),
        local_rank=first_integer(env, ("LOCAL_RANK",)) or Sourced(0, "LOCAL_RANK unset"),
        world_size=world,
        host=host,
        port=port,
        rdzv_id=Sourced(run_id, "TORCHELASTIC_RUN_ID") if run_id else None,
    )

"""Kubeflow's PyTorchJob: the training operator gives each pod ``PET_*`` variables, which torchrun
reads as its flags' defaults, and ``MASTER_ADDR``/``MASTER_PORT``. It also sets ``RANK`` to the
pod's index and ``WORLD_SIZE`` to replicas × nprocPerNode before any launcher runs: those say
nothing about this process, which is one pod's task; dpwise launches the pod's workers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from dpwise.errors import DpwiseError
from dpwise.launch.cluster.checks import endpoint as parse_endpoint
from dpwise.launch.cluster.found import Found, Sourced, integer, variable

MARKERS = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_RDZV_ENDPOINT")
AUTO_NPROC = ("auto", "gpu", "cpu")  # torchrun's words: the device count, left to dpwise
C10D_PORT = 29400  # torchrun's port for an endpoint given without one


def detect(env: Mapping[str, str]) -> Found | None:
    if not any(name in env for name in MARKERS):
        return None
    low, high = _nodes(env)
    nproc = _nproc(env)
    restarts = integer(env, "PET_MAX_RESTARTS")
    pod = Found(
        scheduler="kubeflow",
        job="Kubeflow PyTorchJob",
        per_device=False,
        nnodes=high,
        min_nodes=low if low.value != high.value else None,
        nproc=nproc,
        max_restarts=None if restarts is None else Sourced(restarts, "PET_MAX_RESTARTS"),
    )
    if env.get("PET_RDZV_ENDPOINT"):
        return _rendezvous(pod, env)
    if low.value != high.value:
        raise DpwiseError(
            f"{variable(low.source, env)} is an elastic range, which "
            "needs a c10d rendezvous, but PET_RDZV_ENDPOINT is not set: give the PyTorchJob an "
            "elasticPolicy with rdzvBackend c10d (the operator then sets it), or a fixed node count"
        )
    host, port = _first(env, "PET_MASTER_ADDR", "MASTER_ADDR"), _port(env)
    rank = _first_int(env, "PET_NODE_RANK", "RANK")
    if high.value > 1 and (host is None or port is None or rank is None):
        raise DpwiseError(
            f"{low.source}={high.value} nodes, but PET_MASTER_ADDR/PET_MASTER_PORT/PET_NODE_RANK "
            "(or PET_RDZV_ENDPOINT) are not all set: dpwise cannot tell where the pods meet"
        )
    return replace(
        pod,
        host=host,
        port=port,
        node_rank=rank or Sourced(0, "one node"),
        rdzv_backend=Sourced("static", "PET_MASTER_ADDR (torchrun: static rendezvous)"),
    )


def _rendezvous(pod: Found, env: Mapping[str, str]) -> Found:
    """The pod meets the others at PET_RDZV_ENDPOINT (c10d: the rendezvous assigns its rank)."""
    host, port = parse_endpoint(env["PET_RDZV_ENDPOINT"], variable("PET_RDZV_ENDPOINT", env))
    backend = env.get("PET_RDZV_BACKEND")
    return replace(
        pod,
        host=Sourced(host, "PET_RDZV_ENDPOINT"),
        port=Sourced(port or C10D_PORT, "PET_RDZV_ENDPOINT" if port else "torchrun's port"),
        rdzv_backend=None if backend is None else Sourced(backend, "PET_RDZV_BACKEND"),
        rdzv_id=Sourced(env["PET_RDZV_ID"], "PET_RDZV_ID") if env.get("PET_RDZV_ID") else None,
        node_rank=None,  # the c10d rendezvous assigns it
    )


def _nodes(env: Mapping[str, str]) -> tuple[Sourced, Sourced]:
    raw = env.get("PET_NNODES", "1")
    name = "PET_NNODES" if "PET_NNODES" in env else "PET_NNODES unset: one node"
    parts = raw.split(":")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        low, high = 0, -1
    if not 1 <= low <= high:
        raise DpwiseError(
            f"{variable('PET_NNODES', env)} is not a node count (N, or MIN:MAX for an elastic job)"
        )
    return Sourced(low, name), Sourced(high, name)


def _nproc(env: Mapping[str, str]) -> Sourced | None:
    raw = env.get("PET_NPROC_PER_NODE")
    if raw is None or raw.strip().lower() in AUTO_NPROC:
        return None
    value = integer(env, "PET_NPROC_PER_NODE", 1)
    return Sourced(value, "PET_NPROC_PER_NODE")


def _first(env: Mapping[str, str], *names: str) -> Sourced | None:
    for name in names:
        if env.get(name):
            return Sourced(env[name], name)
    return None


def _first_int(env: Mapping[str, str], *names: str) -> Sourced | None:
    for name in names:
        value = integer(env, name)
        if value is not None:
            return Sourced(value, name)
    return None


def _port(env: Mapping[str, str]) -> Sourced | None:
    for name in ("PET_MASTER_PORT", "MASTER_PORT"):
        value = integer(env, name, 1)
        if value is not None:
            return Sourced(value, name)
    return None

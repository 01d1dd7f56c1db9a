"""The topology of one command: the scheduler's view (``detect``, in a stated precedence) and the
flags, resolved into what dpwise does on this node. Flags win; every value keeps its source.

Modes: ``local`` (no scheduler: the flags alone, as on one machine), ``launch`` (the scheduler
started one task on this node: dpwise launches the node's workers through torch's elastic
launcher) and ``worker`` (the scheduler or a launcher started one process per device: this
process is one worker and dpwise starts nothing). A combination that would start too many
processes is refused before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from dpwise.errors import DpwiseError
from dpwise.launch.cluster import checks, elastic, kubeflow, mpi, skypilot, slurm
from dpwise.launch.cluster.found import Found, Sourced
from dpwise.launch.netaddr import split_endpoint

Mode: TypeAlias = Literal["local", "launch", "worker"]
"""What dpwise does on this node (the module's doc): launch nothing but run as on one machine,
launch the node's workers, or be one worker."""

# The order schedulers are read in: a launcher that is already running (its workers' variables
# are the most specific), then SLURM, Kubeflow, MPI and SkyPilot; Open MPI's and MVAPICH2's
# ranks come before SLURM (detect), since their mpirun started this process.
READERS: dict[str, Callable[[Mapping[str, str]], Found | None]] = {
    "torchrun": elastic.detect,
    "slurm": slurm.detect,
    "kubeflow": kubeflow.detect,
    "mpi": mpi.detect,
    "skypilot": skypilot.detect,
}
NAMES = {"torchrun": "torchrun", "slurm": "SLURM", "kubeflow": "Kubeflow", "mpi": "MPI",
         "skypilot": "SkyPilot"}  # fmt: skip
CLUSTERS = ("auto", "none", "slurm", "kubeflow", "mpi", "skypilot")
CLUSTER_HELP = (
    "where the job runs: auto (default) reads torchrun's, SLURM's, Kubeflow's, MPI's or "
    "SkyPilot's variables, in that order (Open MPI's ranks before SLURM's); a name reads only "
    "that one; none ignores every scheduler's variables (a launcher's worker stays one)"
)
# The settings the topology may fill when the user has not given them.
LAUNCH_FLAGS = ("nproc", "nnodes", "node_rank", "rdzv_endpoint", "rdzv_backend", "rdzv_id",
                "max_restarts")  # fmt: skip
SCHEDULER_ENV = "DPWISE_SCHEDULER"  # the scheduler a worker was started by (set by adopt)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def detect(env: Mapping[str, str], cluster: str = "auto") -> Found | None:
    """The first scheduler whose variables this process has (``cluster``: only that one)."""
    if cluster == "none":
        return elastic.detect(env)  # a launcher's worker is one whatever the flag says
    if cluster != "auto":
        found = READERS[cluster](env)
        if found is None:
            raise DpwiseError(
                f"--cluster {cluster}: this process has none of {cluster}'s variables "
                f"({_markers(cluster)}); use --cluster auto, or start dpwise under {cluster}"
            )
        return found
    if any(family[1] in env for family in mpi.FAMILIES[:2]):
        # Open MPI's and MVAPICH2's mpirun start every rank themselves: inside an sbatch job,
        # SLURM's variables there describe mpirun's daemons (one task per node), not the ranks
        return READERS["mpi"](env)
    for name, reader in READERS.items():
        found = reader(env)
        if found is not None:
            if name == "torchrun" and "TORCHELASTIC_RUN_ID" not in env:
                return _exported(found, env)
            return found
    return None


def _per_device_scheduler(env: Mapping[str, str]) -> Found | None:
    """SLURM's or MPI's view where either runs this process as one of several on its node
    (under a launcher's variables); their variables are not this launch's to judge where they
    do not read."""
    for name in ("slurm", "mpi"):
        try:
            theirs = READERS[name](env)
        except DpwiseError:
            continue
        if theirs is not None and theirs.per_device and theirs.nproc is not None:
            return theirs
    return None


def _exported(found: Found, env: Mapping[str, str]) -> Found:
    """RANK, LOCAL_RANK and WORLD_SIZE without torchrun: often a job script's own copy of
    SLURM's or MPI's (``export RANK=$SLURM_PROCID``). Where that scheduler runs this process
    per device with the same rank, its view is the fuller one (nodes, tasks per node)."""
    theirs = _per_device_scheduler(env)
    if theirs is None or theirs.rank is None or found.rank is None:
        return found
    return theirs if theirs.rank.value == found.rank.value else found


def _markers(cluster: str) -> str:
    return {
        "slurm": "SLURM_NTASKS",
        "kubeflow": ", ".join(kubeflow.MARKERS),
        "mpi": ", ".join(f[1] for f in mpi.FAMILIES),
        "skypilot": "SKYPILOT_NODE_RANK",
    }[cluster]


@dataclass(frozen=True, kw_only=True)
class Topology:
    found: Found | None
    mode: Mode
    values: dict[str, Sourced] = field(default_factory=dict)  # the settings it resolved

    @property
    def scheduler(self) -> str | None:
        return self.found.scheduler if self.found else None

    def settings(self) -> dict[str, Any]:
        """What the command's settings take from the topology (the flags' own values included);
        min_nnodes where the scheduler gives an elastic range. A worker launches nothing: its
        place comes from its variables (worker_environ), not from launch settings."""
        if self.mode == "worker":
            return {}
        wanted = (*LAUNCH_FLAGS, "min_nnodes")
        return {k: v.value for k, v in self.values.items() if k in wanted}

    def worker_environ(self) -> dict[str, str]:
        """The variables a process the scheduler started per device takes on, so that it is a
        worker as torchrun's are (empty unless mode is worker under a scheduler)."""
        if self.mode != "worker" or self.scheduler == "torchrun":
            return {}
        v = self.values
        return {
            "RANK": str(v["rank"].value),
            "LOCAL_RANK": str(v["local_rank"].value),
            "WORLD_SIZE": str(v["world_size"].value),
            "LOCAL_WORLD_SIZE": str(v["nproc"].value),
            "GROUP_RANK": str(v["node_rank"].value),
            "MASTER_ADDR": str(v["master_addr"].value),
            "MASTER_PORT": str(v["master_port"].value),
            SCHEDULER_ENV: str(self.scheduler),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "job": self.found.job if self.found else None,
            "mode": self.mode,
            **{name: value.to_dict() for name, value in self.values.items()},
        }


def adopt(topo: Topology) -> None:
    """Make this process the worker the scheduler started (its variables, as torchrun's
    workers have them); nothing to do in the other modes. Where the nodes meet was checked
    when the topology was made (``meeting``)."""
    os.environ.update(topo.worker_environ())


def meeting(topo: Topology, env: Mapping[str, str]) -> None:
    """For a command that launches: where the nodes meet resolves here and, on one node, is
    this node (checks.meeting); one line before anything starts, --dry-run included."""
    checks.meeting(topo.values, topo.found, env)


def resolve(given: Mapping[str, Any], env: Mapping[str, str], cluster: str = "auto") -> Topology:
    """The topology from the flags the user gave (``given``: only those) and the environment,
    every value checked (checks.found, checks.endpoint) before it reaches torch."""
    if given.get("rdzv_endpoint") is not None:
        checks.endpoint(given["rdzv_endpoint"], f"--rdzv-endpoint {given['rdzv_endpoint']!r}")
    found = detect(env, cluster)
    if found is None:
        return Topology(found=None, mode="local", values=_flags(given))
    checks.found(found, env)
    if found.scheduler == "torchrun" and cluster != "none" and "TORCHELASTIC_RUN_ID" in env:
        _check_nested(found, env)
    if found.per_device:
        return _worker(found, given, env)
    return _launch(found, given)


def _flags(given: Mapping[str, Any]) -> dict[str, Sourced]:
    return {k: Sourced(v, flag(k)) for k, v in given.items() if k in LAUNCH_FLAGS}


def _launch(found: Found, given: Mapping[str, Any]) -> Topology:
    values = _flags(given)
    theirs: dict[str, Sourced | None] = {
        "nnodes": found.nnodes,
        "node_rank": found.node_rank,
        "nproc": found.nproc,
        "rdzv_backend": found.rdzv_backend,
        "rdzv_id": found.rdzv_id,
        "max_restarts": found.max_restarts,
    }
    if found.host is not None and found.port is not None:
        source = found.host.source
        if found.port.source != found.host.source:
            source = f"{found.host.source}, {found.port.source}"
        theirs["rdzv_endpoint"] = Sourced(_endpoint(found.host.value, found.port.value), source)
    for name, value in theirs.items():
        if name not in values and value is not None:
            values[name] = value
    if found.min_nodes is not None and "nnodes" not in given:
        values["min_nnodes"] = found.min_nodes
    if values.get("rdzv_backend", Sourced("c10d", "")).value not in ("c10d", "static"):
        backend = values["rdzv_backend"]
        raise DpwiseError(
            f"{backend.source}={backend.value!r}: dpwise meets through torch's c10d (or static) "
            "rendezvous; set the job's rendezvous backend to c10d"
        )
    if values.get("nnodes", Sourced(1, "")).value > 1 and "rdzv_endpoint" not in values:
        raise DpwiseError(
            f"{found.job} runs on {values['nnodes'].value} nodes but says nowhere where they "
            "meet: give --rdzv-endpoint HOST:PORT"
        )
    return Topology(found=found, mode="launch", values=values)


def _worker(found: Found, given: Mapping[str, Any], env: Mapping[str, str]) -> Topology:
    assert found.nproc is not None and found.rank is not None and found.world_size is not None
    here = found.nproc.value
    nproc = given.get("nproc")
    if nproc is not None and (nproc > 1 if found.scheduler != "torchrun" else nproc != here):
        raise DpwiseError(_double_launch(found, nproc))
    for name in ("nnodes", "node_rank"):
        theirs = getattr(found, name)
        if name in given and theirs is not None and given[name] != theirs.value:
            raise DpwiseError(
                f"{flag(name)} {given[name]} disagrees with {found.job}, which started this "
                f"process with {theirs.source}={theirs.value}: drop {flag(name)}"
            )
    values: dict[str, Sourced] = {
        "nnodes": found.nnodes,
        "node_rank": found.node_rank or Sourced(0, "default"),
        "nproc": found.nproc,
        "rank": found.rank,
        "local_rank": found.local_rank or Sourced(0, "default"),
        "world_size": found.world_size,
    }
    host, port = found.host, found.port
    if "rdzv_endpoint" in given:
        name, number = split_endpoint(given["rdzv_endpoint"])
        host = Sourced(name, "--rdzv-endpoint")
        port = Sourced(number, "--rdzv-endpoint") if number else port
    if found.scheduler != "torchrun":
        if host is None or port is None:
            raise DpwiseError(f"{found.job}: give --rdzv-endpoint HOST:PORT where rank 0 runs")
        values["master_addr"], values["master_port"] = host, port
        _check_leftovers(found, values, env)
    elif host is not None and port is not None:
        values["master_addr"], values["master_port"] = host, port
    if found.rdzv_id is not None:
        values["rdzv_id"] = found.rdzv_id
    return Topology(found=found, mode="worker", values=values)


def _check_nested(found: Found, env: Mapping[str, str]) -> None:
    """torchrun inside a scheduler's per-device tasks: each task's torchrun starts its own
    workers (the "Duplicate GPU detected" jobs). Refused where both start several."""
    workers = found.nproc.value if found.nproc else 1
    under = _per_device_scheduler(env) if workers > 1 else None
    if under is not None and under.nproc is not None:
        tasks = under.nproc.value
        raise DpwiseError(
            f"torchrun started {workers} workers in each of the {tasks} tasks {under.job} runs "
            f"on this node ({under.nproc.source}={tasks}): {workers * tasks} processes. Either "
            "submit one task per node (SLURM: --ntasks-per-node=1; MPI: one rank per node) and "
            "keep torchrun, or drop torchrun and let each task be one worker (srun dpwise train "
            "…, without --nproc)"
        )


def _double_launch(found: Found, nproc: int) -> str:
    here = found.nproc.value if found.nproc else 1
    if found.scheduler == "torchrun":
        return (
            f"--nproc {nproc}, but this process is already one of torchrun's {here} workers on "
            f"this node ({found.nproc.source if found.nproc else 'LOCAL_WORLD_SIZE'}): drop "
            f"--nproc (torchrun started the workers), or run `dpwise train --nproc {nproc}` "
            "without torchrun (dpwise starts them)"
        )
    return (
        f"--nproc {nproc} would start {nproc} workers in each of the {here} processes "
        f"{found.job} already runs on this node ({found.nproc.source if found.nproc else ''}"
        f"={here}, one per device): {here * nproc} processes. Either drop --nproc (each "
        f"process becomes one worker), or start one task per node (SLURM: "
        f"--ntasks-per-node=1; MPI: one rank per node) and keep --nproc {nproc}"
    )


def _check_leftovers(found: Found, values: dict[str, Sourced], env: Mapping[str, str]) -> None:
    """A worker variable already set to another value is refused, never overwritten silently."""
    mine = {
        "RANK": values["rank"].value,
        "LOCAL_RANK": values["local_rank"].value,
        "WORLD_SIZE": values["world_size"].value,
        "LOCAL_WORLD_SIZE": values["nproc"].value,
        "GROUP_RANK": values["node_rank"].value,
    }
    for name, value in mine.items():
        raw = env.get(name)
        if raw is not None and raw.strip() != str(value):
            theirs = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size",
                      "GROUP_RANK": "node_rank"}  # fmt: skip
            source = values[theirs.get(name, "nproc")].source
            raise DpwiseError(
                f"environment variable {name}={raw!r} disagrees with {found.job} "
                f"({source}={value}): it is left from another launch; unset {name}, or pass "
                "--cluster none to follow the variables already set"
            )


def _endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

"""SLURM: `srun` started this process, one task per node (dpwise launches the node's workers) or
one task per device (dpwise becomes that worker).

Read without `scontrol`: the step's variables first (``SLURM_STEP_*``, what this `srun` placed),
then the job's. An interactive allocation (job name ``bash`` or ``interactive``, as Lightning
reads it) is not a SLURM launch; the batch script itself (no step) runs on the first node only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from dpwise.errors import DpwiseError
from dpwise.launch.cluster import hostlist
from dpwise.launch.cluster.found import (
    Found,
    Sourced,
    first_integer,
    integer,
    job_port,
    master,
    variable,
)

INTERACTIVE_NAMES = ("bash", "interactive")
BATCH_STEP_IDS = ("batch", "4294967294")  # SLURM_BATCH_SCRIPT, where a version sets the id
_TASKS_ITEM = re.compile(r"(\d{1,9})(?:\(x(\d{1,9})\))?\Z")

TASKS = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
NODES = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
NODE_LISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
TASKS_PER_NODE = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")


def detect(env: Mapping[str, str]) -> Found | None:
    if not any(name in env for name in TASKS):
        return None
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "?"
    job = f"SLURM job {job_id}"
    step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID"))
    if env.get("SLURM_JOB_NAME") in INTERACTIVE_NAMES and not _several_tasks(env, step):
        return None  # salloc's shell or `srun --pty bash`: the user runs by hand, as on one machine
    if step is None or step in BATCH_STEP_IDS:
        return _batch_script(env, job)
    nnodes = first_integer(env, NODES, 1)
    tasks = first_integer(env, TASKS, 1)
    if nnodes is None or tasks is None:
        raise DpwiseError(f"{job}: {NODES[1]} and {TASKS[1]} must both be set in an srun step")
    hosts, list_name = _hosts(env, nnodes)
    if tasks.value < nnodes.value:
        raise DpwiseError(
            f"environment variable {tasks.source}={tasks.value} disagrees with "
            f"{nnodes.source}={nnodes.value}: fewer tasks than nodes"
        )
    per_node = _tasks_per_node(env, nnodes, tasks)
    node = first_integer(env, ("SLURM_NODEID",)) or Sourced(0, "SLURM_NODEID unset: node 0")
    if node.value >= nnodes.value:
        raise DpwiseError(
            f"environment variable SLURM_NODEID={node.value} must be below "
            f"{nnodes.source}={nnodes.value}"
        )
    host, port = master(env)
    host = host or Sourced(hosts[0], f"first host of {list_name}")
    port = port or job_port(job_id, "the job id")
    per_node_task = Found(scheduler="slurm", job=job, per_device=False, nnodes=nnodes,
                          node_rank=node, host=host, port=port,
                          rdzv_id=Sourced(job_id, "SLURM_JOB_ID"))  # fmt: skip
    if tasks.value == nnodes.value:  # one task per node: dpwise starts the node's workers
        return per_node_task
    here = per_node[node.value]
    rank, local = integer(env, "SLURM_PROCID"), integer(env, "SLURM_LOCALID")
    if rank is None or local is None:
        raise DpwiseError(f"{job}: SLURM_PROCID and SLURM_LOCALID must be set in an srun step")
    if rank >= tasks.value or local >= here.value:
        raise DpwiseError(
            f"environment variables SLURM_PROCID={rank} / SLURM_LOCALID={local} lie outside "
            f"{tasks.source}={tasks.value} / {here.source} ({here.value} on this node)"
        )
    return replace(
        per_node_task,
        per_device=True,
        nproc=here,
        rank=Sourced(rank, "SLURM_PROCID"),
        local_rank=Sourced(local, "SLURM_LOCALID"),
        world_size=tasks,
    )


def _several_tasks(env: Mapping[str, str], step: str | None) -> bool:
    """Whether this is an srun step of several tasks: `srun -N2 dpwise …` from an interactive
    allocation is a launch even though the job's name says interactive (Lightning's test alone
    would make each node train by itself there)."""
    if step is None or step in BATCH_STEP_IDS:
        return False
    tasks = first_integer(env, TASKS, 1)
    return tasks is not None and tasks.value > 1


def _batch_script(env: Mapping[str, str], job: str) -> Found:
    """The batch script runs once, on the first node: fine for one node, a mistake for more."""
    nnodes = first_integer(env, NODES[1:], 1) or Sourced(1, "one node")
    if nnodes.value > 1:
        raise DpwiseError(
            f"this is {job}'s batch script, which SLURM runs on the first of its "
            f"{nnodes.value} nodes only ({nnodes.source}={nnodes.value}): start dpwise with "
            "srun, one task per node (`srun --ntasks-per-node=1 dpwise …`), or pass "
            "--cluster none to run on this node alone"
        )
    return Found(
        scheduler="slurm",
        job=f"{job} (batch script)",
        per_device=False,
        nnodes=nnodes,
        node_rank=Sourced(0, "the batch script's node"),
    )


def _hosts(env: Mapping[str, str], nnodes: Sourced) -> tuple[list[str], str]:
    for name in NODE_LISTS:
        raw = env.get(name)
        if raw is None:
            continue
        try:
            hosts = hostlist.expand(raw)  # counted first: a list too long is refused unexpanded
        except hostlist.BadHostlist as exc:
            raise DpwiseError(f"{variable(name, env)} is not a SLURM node list ({exc})") from None
        if len(hosts) != nnodes.value:
            raise DpwiseError(
                f"{variable(name, env)} names {len(hosts)} host(s), but "
                f"{nnodes.source}={nnodes.value}"
            )
        return hosts, name
    raise DpwiseError(f"none of {', '.join(NODE_LISTS)} is set: dpwise cannot find the nodes")


def _tasks_per_node(env: Mapping[str, str], nnodes: Sourced, tasks: Sourced) -> list[Sourced]:
    """Each node's task count: SLURM's ``2(x3),1`` form, else a uniform count."""
    for name in TASKS_PER_NODE:
        if name not in env:
            continue
        counts = parse_tasks_per_node(name, env)
        if len(counts) != nnodes.value or sum(counts) != tasks.value:
            raise DpwiseError(
                f"{variable(name, env)} ({sum(counts)} task(s) on {len(counts)} "
                f"node(s)) disagrees with {tasks.source}={tasks.value} on "
                f"{nnodes.source}={nnodes.value}"
            )
        return [Sourced(count, name) for count in counts]
    uniform = integer(env, "SLURM_NTASKS_PER_NODE", 1)
    if uniform is not None:
        if uniform * nnodes.value != tasks.value:
            raise DpwiseError(
                f"environment variable SLURM_NTASKS_PER_NODE={uniform} on "
                f"{nnodes.source}={nnodes.value} disagrees with {tasks.source}={tasks.value}"
            )
        return [Sourced(uniform, "SLURM_NTASKS_PER_NODE")] * nnodes.value
    if tasks.value % nnodes.value:
        raise DpwiseError(
            f"environment variable {tasks.source}={tasks.value} does not divide among "
            f"{nnodes.source}={nnodes.value} nodes, and SLURM_STEP_TASKS_PER_NODE is not set"
        )
    share = tasks.value // nnodes.value
    return [Sourced(share, f"{tasks.source} ÷ {nnodes.source}")] * nnodes.value


def parse_tasks_per_node(name: str, env: Mapping[str, str]) -> list[int]:
    """SLURM's per-node task counts: ``2(x3),1`` is [2, 2, 2, 1]; counted before it is
    expanded (no more nodes than a node list may name)."""
    items = []
    for item in env[name].split(","):
        match = _TASKS_ITEM.match(item.strip())
        if match is None:
            raise DpwiseError(
                f"{variable(name, env)} is not SLURM's tasks-per-node form (e.g. 8(x2),4)"
            )
        items.append((int(match.group(1)), int(match.group(2) or 1)))
    if sum(times for _, times in items) > hostlist.MAX_SIZE:
        raise DpwiseError(f"{variable(name, env)} counts more than {hostlist.MAX_SIZE} nodes")
    return [count for count, times in items for _ in range(times)]

"""Where compare may run under a scheduler: one task on one node (it starts every run's
processes itself); --dry-run's lines."""

from __future__ import annotations

from collections.abc import Sequence

from dpwise.errors import DpwiseError
from dpwise.launch.cluster import text as topology_text
from dpwise.launch.cluster.topology import Topology


def one_node(topology: Topology, argv: Sequence[str]) -> list[str]:
    """compare starts every run's processes itself, on this node: under a scheduler it must be
    one task on one node. The --dry-run lines where it is; DpwiseError where it is not."""
    found = topology.found
    if found is not None and (found.nnodes.value > 1 or topology.mode == "worker"):
        world = topology.values.get("world_size")
        many = f"{world.value} processes" if world is not None else f"{found.nnodes.value} nodes"
        raise DpwiseError(
            f"compare starts every run's processes itself on one node, but {found.job} runs it "
            f"as {many} ({(world or found.nnodes).source}): each would compare alone into "
            "the same --out; submit it as one task on one node (SLURM: srun -N1 -n1 dpwise "
            "compare …; MPI: mpirun -np 1), or pass --cluster none"
        )
    return [
        "dpwise compare --dry-run: nothing started",
        *topology_text.resolution_lines(topology),
        "compare runs every strategy and world size on this node, one run after another",
        "command on this node:",
        "  " + topology_text.command(topology, "dpwise", argv, []),
    ]

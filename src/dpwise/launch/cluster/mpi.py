"""MPI: `mpirun`/`mpiexec` started this process (Open MPI, MVAPICH2, or an MPICH/Intel MPI hydra
with PMI). Several ranks on this node: each is one worker; one rank per node: dpwise launches the
node's workers. MPI does not say where rank 0 runs: a job on several nodes needs
``MASTER_ADDR`` exported to every rank (``mpirun -x MASTER_ADDR=host``)."""

from __future__ import annotations

from collections.abc import Mapping

from dpwise.errors import DpwiseError
from dpwise.launch.cluster.found import Found, Sourced, integer, job_port, master

# (name, rank, size, local rank, local size)
FAMILIES: tuple[tuple[str, str, str, str, str], ...] = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MVAPICH2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE",
     "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("MPI (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)  # fmt: skip
JOB_IDS = ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_JOBID")
LOOPBACK = "127.0.0.1"


def detect(env: Mapping[str, str]) -> Found | None:
    names = next((names for names in FAMILIES if names[1] in env), None)
    if names is None:
        return None
    family, rank_var, size_var, local_var, local_size_var = names
    size = integer(env, size_var, 1)
    rank = integer(env, rank_var)
    local = integer(env, local_var)
    local_size = integer(env, local_size_var, 1)
    read = ((size_var, size), (local_var, local), (local_size_var, local_size))
    missing = [name for name, value in read if value is None]
    if missing:
        raise DpwiseError(
            f"{family}: {rank_var} is set but {', '.join(missing)} is not: dpwise cannot tell "
            "how many processes run and how many share this node"
        )
    assert size is not None and rank is not None and local is not None and local_size is not None
    if rank >= size or local >= local_size or size % local_size:
        raise DpwiseError(
            f"environment variables {rank_var}={rank}, {size_var}={size}, {local_var}={local}, "
            f"{local_size_var}={local_size} do not describe one job of equal nodes"
        )
    nnodes = size // local_size
    job_id = next((env[n] for n in JOB_IDS if env.get(n)), None)
    host, port = master(env)
    if host is None:
        if nnodes > 1:
            raise DpwiseError(
                f"{family} runs {size} processes on {nnodes} nodes but does not say where rank "
                "0 runs: export MASTER_ADDR to every rank (mpirun -x MASTER_ADDR=<rank 0's host>)"
            )
        host = Sourced(LOOPBACK, f"one node ({local_size_var} = {size_var})")
    if port is None:
        port = job_port(job_id, "the MPI job id") if job_id else Sourced(29500, "torch's default")
    job = f"{family} job" + (f" {job_id}" if job_id else "")
    nodes = Sourced(nnodes, f"{size_var} ÷ {local_size_var}")
    if local_size == 1:  # one rank per node: dpwise starts the node's workers
        return Found(
            scheduler="mpi", job=job, per_device=False, nnodes=Sourced(size, size_var),
            node_rank=Sourced(rank, rank_var), host=host, port=port,
            rdzv_id=Sourced(job_id, "the MPI job id") if job_id else None,
        )  # fmt: skip
    return Found(
        scheduler="mpi", job=job, per_device=True, nnodes=nodes,
        node_rank=Sourced(rank // local_size, f"{rank_var} ÷ {local_size_var}"),
        nproc=Sourced(local_size, local_size_var), rank=Sourced(rank, rank_var),
        local_rank=Sourced(local, local_var), world_size=Sourced(size, size_var),
        host=host, port=port,
    )  # fmt: skip

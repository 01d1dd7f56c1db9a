"""Where the job runs: each scheduler's variables resolved to a topology (golden resolutions),
the precedence, flags winning, leftovers, double launches refused, bad variables one line."""

from __future__ import annotations

import os
import random

import pytest

from dpwise.errors import DpwiseError
from dpwise.launch.cluster import hostlist
from dpwise.launch.cluster.topology import detect, meeting, resolve
from dpwise.launch.env import DistEnv

hostlist_ref = pytest.importorskip("hostlist")  # python-hostlist, the reference (dev extra)

SLURM_STEP = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train", "SLURM_STEP_ID": "0"}


def slurm(nodes: int, tasks: int, node: int, proc: int, local: int, **more: str) -> dict:
    return {
        **SLURM_STEP,
        "SLURM_NNODES": str(nodes),
        "SLURM_NTASKS": str(tasks),
        "SLURM_JOB_NODELIST": "gpu[01-04,07]" if nodes == 5 else f"gpu[01-{nodes:02d}]",
        "SLURM_NODEID": str(node),
        "SLURM_PROCID": str(proc),
        "SLURM_LOCALID": str(local),
        **more,
    }


def golden(topo) -> dict:
    return {k: (v.value, v.source) for k, v in topo.values.items()}


# -- hostlists ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["gpu[01-04,07]", "a-[1-2]-[3-4]", "n1,n2,m[3-4]", "x[8-11]", "x[08-11]", "x[1-010]",
     "a[1-3]b", "x[009-011],y", "node-[1,3-5]-ib", ",x,,y", "x[1-2],x1", "x[01-1]", "[1-2]"],
)  # fmt: skip
def test_hostlists_expand_as_python_hostlist_does(text):
    assert hostlist.expand(text) == hostlist_ref.expand_hostlist(text)


@pytest.mark.parametrize("text", ["x[", "x]", "x[3-1]", "x[a-b]", "x[1-2", "x[[1]]", "x[]",
                                  "x[-1]", "x[1-100001]"])  # fmt: skip
def test_bad_hostlists_are_refused_as_python_hostlist_refuses_them(text):
    with pytest.raises(hostlist_ref.BadHostlist):
        hostlist_ref.expand_hostlist(text)
    with pytest.raises(hostlist.BadHostlist):
        hostlist.expand(text)


def test_random_hostlists_agree_with_python_hostlist():
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice("ab-,[]0129") for _ in range(rng.randint(0, 12)))
        try:
            want = hostlist_ref.expand_hostlist(text)
        except hostlist_ref.BadHostlist:
            with pytest.raises(hostlist.BadHostlist):
                hostlist.expand(text)
            continue
        assert hostlist.expand(text) == want, text


# -- SLURM ----------------------------------------------------------------------------------


def test_slurm_one_task_per_node_launches_the_nodes_workers():
    topo = resolve({}, slurm(4, 4, 2, 2, 0))
    assert topo.mode == "launch"
    assert golden(topo) == {
        "nnodes": (4, "SLURM_NNODES"),
        "node_rank": (2, "SLURM_NODEID"),
        "rdzv_id": ("4242", "SLURM_JOB_ID"),
        "rdzv_endpoint": ("gpu01:19242", "first host of SLURM_JOB_NODELIST, port from the job id"),
    }
    assert topo.settings() == {"nnodes": 4, "node_rank": 2, "rdzv_id": "4242",
                               "rdzv_endpoint": "gpu01:19242"}  # fmt: skip


def test_slurm_one_task_per_gpu_makes_each_task_a_worker():
    env = slurm(5, 40, 4, 37, 5, SLURM_STEP_TASKS_PER_NODE="8(x5)")
    topo = resolve({}, env)
    assert topo.mode == "worker" and topo.settings() == {}
    assert topo.worker_environ() == {
        "RANK": "37", "LOCAL_RANK": "5", "WORLD_SIZE": "40", "LOCAL_WORLD_SIZE": "8",
        "GROUP_RANK": "4", "MASTER_ADDR": "gpu01", "MASTER_PORT": "19242",
        "DPWISE_SCHEDULER": "slurm",
    }  # fmt: skip
    worker = DistEnv.from_environ(topo.worker_environ())
    assert (worker.rank, worker.world_size, worker.launched_by) == (37, 40, "slurm")


def test_slurm_uneven_tasks_per_node_give_this_nodes_count():
    env = slurm(3, 7, 2, 6, 0, SLURM_STEP_TASKS_PER_NODE="3(x2),1")
    assert golden(resolve({}, env))["nproc"] == (1, "SLURM_STEP_TASKS_PER_NODE")


def test_master_addr_already_set_is_kept_and_said():
    env = slurm(2, 4, 0, 1, 1, MASTER_ADDR="head", MASTER_PORT="23456")
    values = golden(resolve({}, env))
    assert values["master_addr"] == ("head", "MASTER_ADDR, already set")
    assert values["master_port"] == (23456, "MASTER_PORT, already set")


def test_flags_win_over_slurm_and_say_so():
    topo = resolve({"nnodes": 2, "rdzv_endpoint": "me:1234", "nproc": 3}, slurm(4, 4, 1, 1, 0))
    values = golden(topo)
    assert values["nnodes"] == (2, "--nnodes") and values["nproc"] == (3, "--nproc")
    assert values["rdzv_endpoint"] == ("me:1234", "--rdzv-endpoint")
    assert values["node_rank"] == (1, "SLURM_NODEID")


def test_an_interactive_shell_is_not_a_launch_but_srun_from_it_is():
    shell = {k: v for k, v in slurm(2, 2, 0, 0, 0).items() if k != "SLURM_STEP_ID"}
    assert detect({**shell, "SLURM_JOB_NAME": "interactive"}) is None  # salloc's own shell
    pty = slurm(2, 1, 0, 0, 0, SLURM_JOB_NAME="bash", SLURM_STEP_NUM_TASKS="1")
    assert detect(pty) is None  # `srun --pty bash`: one task, run by hand
    step = slurm(2, 2, 1, 1, 0, SLURM_JOB_NAME="interactive")  # `srun -N2 dpwise …` from salloc
    assert detect(step).scheduler == "slurm" and resolve({}, step).settings()["node_rank"] == 1


def test_the_batch_script_of_one_node_runs_as_one_machine_of_several_is_refused():
    one = {k: v for k, v in slurm(1, 8, 0, 0, 0).items() if k != "SLURM_STEP_ID"}
    topo = resolve({"nproc": 2}, one)
    assert topo.mode == "launch" and topo.settings() == {"nproc": 2, "nnodes": 1, "node_rank": 0}
    many = {k: v for k, v in slurm(2, 16, 0, 0, 0).items() if k != "SLURM_STEP_ID"}
    with pytest.raises(DpwiseError, match=r"batch script.*srun"):
        resolve({}, many)


# -- double launches -------------------------------------------------------------------------


def test_slurm_tasks_per_gpu_with_nproc_is_refused_with_both_fixes():
    env = slurm(2, 16, 0, 0, 0, SLURM_NTASKS_PER_NODE="8")
    with pytest.raises(DpwiseError) as err:
        resolve({"nproc": 8}, env)
    said = str(err.value)
    assert "64 processes" in said and "drop --nproc" in said and "--ntasks-per-node=1" in said
    assert "\n" not in said
    assert resolve({"nproc": 1}, env).mode == "worker"  # one worker per task: no double launch


def test_torchrun_with_another_nproc_is_refused_with_both_fixes():
    env = {"TORCHELASTIC_RUN_ID": "r", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    with pytest.raises(DpwiseError, match=r"already one of torchrun's 2 workers.*without torchrun"):
        resolve({"nproc": 4}, env)
    assert resolve({"nproc": 2}, env).mode == "worker"  # the same count starts nothing more


def test_torchrun_inside_slurms_per_gpu_tasks_is_refused():
    env = {**slurm(2, 16, 0, 3, 3, SLURM_NTASKS_PER_NODE="8"), "TORCHELASTIC_RUN_ID": "4242",
           "RANK": "5", "LOCAL_RANK": "5", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}  # fmt: skip
    with pytest.raises(DpwiseError, match=r"8 tasks SLURM job 4242 runs on this node .*64 proc"):
        resolve({}, env)
    assert resolve({}, env, "none").mode == "worker"  # --cluster none: torchrun's word alone


def test_torchrun_under_slurm_is_torchruns_worker():
    env = {**slurm(2, 2, 0, 0, 0), "TORCHELASTIC_RUN_ID": "4242", "RANK": "3",
           "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    topo = resolve({}, env)
    assert topo.scheduler == "torchrun" and topo.mode == "worker" and topo.worker_environ() == {}


# -- Kubeflow, MPI, SkyPilot ------------------------------------------------------------------

KUBEFLOW = {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "2",
            "PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456",
            "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "RANK": "2",
            "WORLD_SIZE": "12"}  # fmt: skip


def test_kubeflow_pods_rank_and_world_are_not_a_worker():
    assert not DistEnv.from_environ(KUBEFLOW).under_launcher
    topo = resolve({}, KUBEFLOW)
    assert topo.mode == "launch"
    assert golden(topo) == {
        "nnodes": (3, "PET_NNODES"),
        "node_rank": (2, "PET_NODE_RANK"),
        "nproc": (4, "PET_NPROC_PER_NODE"),
        "rdzv_backend": ("static", "PET_MASTER_ADDR (torchrun: static rendezvous)"),
        "rdzv_endpoint": ("job-master-0:23456", "PET_MASTER_ADDR, PET_MASTER_PORT"),
    }


def test_kubeflow_elastic_range_takes_the_c10d_endpoint():
    env = {"PET_NNODES": "1:3", "PET_NPROC_PER_NODE": "auto", "PET_RDZV_ENDPOINT": "svc:29400",
           "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ID": "job", "PET_MAX_RESTARTS": "3"}  # fmt: skip
    topo = resolve({}, env)
    want = {"nnodes": 3, "min_nnodes": 1, "rdzv_endpoint": "svc:29400", "rdzv_backend": "c10d",
            "rdzv_id": "job", "max_restarts": 3}  # fmt: skip
    assert topo.settings() == want


def test_open_mpi_ranks_per_node_are_workers():
    env = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
           "MASTER_ADDR": "n1", "OMPI_MCA_ess_base_jobid": "3148480513"}  # fmt: skip
    topo = resolve({}, env)
    assert topo.mode == "worker"
    assert golden(topo)["node_rank"] == (1, "OMPI_COMM_WORLD_RANK ÷ OMPI_COMM_WORLD_LOCAL_SIZE")
    assert topo.worker_environ()["MASTER_PORT"] == "15513"


def test_one_mpi_rank_per_node_launches():
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1",
           "MASTER_ADDR": "n1", "MASTER_PORT": "29511"}  # fmt: skip
    topo = resolve({}, env)
    assert topo.mode == "launch" and topo.settings()["rdzv_endpoint"] == "n1:29511"


def test_skypilot_gives_nodes_rank_gpus_and_the_head():
    env = {"SKYPILOT_NODE_RANK": "1", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.6", "SKYPILOT_NUM_GPUS_PER_NODE": "8",
           "SKYPILOT_TASK_ID": "sky-2026-12-02-1234"}  # fmt: skip
    assert resolve({}, env).settings() == {"nnodes": 2, "node_rank": 1, "nproc": 8,
                                           "rdzv_id": "sky-2026-12-02-1234",
                                           "rdzv_endpoint": "10.0.0.5:16234"}  # fmt: skip


def test_mpirun_inside_an_sbatch_job_reads_the_ranks_not_slurms_daemons():
    # mpirun -np 16 --npernode 8 -x MASTER_ADDR … in a 2-node job: SLURM's variables describe
    # the step of mpirun's daemons (one per node); each rank is one of 8 on its node
    env = {**slurm(2, 2, 1, 1, 0), "OMPI_COMM_WORLD_RANK": "11", "OMPI_COMM_WORLD_SIZE": "16",
           "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
           "MASTER_ADDR": "gpu01", "MASTER_PORT": "14242"}  # fmt: skip
    topo = resolve({}, env)
    assert (topo.scheduler, topo.mode) == ("mpi", "worker")
    assert topo.worker_environ()["RANK"] == "11" and topo.worker_environ()["WORLD_SIZE"] == "16"


def test_ranks_a_job_script_copied_from_slurm_read_as_slurms():
    # export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS: no torchrun
    env = {**slurm(2, 8, 1, 5, 1, SLURM_NTASKS_PER_NODE="4"), "RANK": "5", "LOCAL_RANK": "1",
           "WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "12345"}  # fmt: skip
    topo = resolve({}, env)
    assert (topo.scheduler, topo.mode) == ("slurm", "worker")
    assert topo.worker_environ()["LOCAL_WORLD_SIZE"] == "4"  # what the script left out
    assert golden(topo)["nnodes"] == (2, "SLURM_NNODES")


def test_precedence_and_forcing():
    both = {**slurm(2, 2, 0, 0, 0), **KUBEFLOW}
    assert detect(both).scheduler == "slurm"
    assert detect(both, "kubeflow").scheduler == "kubeflow"
    assert detect(both, "none") is None
    with pytest.raises(DpwiseError, match="--cluster mpi: this process has none of mpi's"):
        detect(both, "mpi")


# -- leftovers and bad input ----------------------------------------------------------------


def test_a_leftover_rank_that_disagrees_is_refused_not_overwritten():
    env = slurm(1, 2, 0, 1, 1, RANK="0")
    with pytest.raises(
        DpwiseError, match=r"RANK='0' disagrees with SLURM job 4242 \(SLURM_PROCID=1\)"
    ):
        resolve({}, env)
    assert resolve({}, slurm(1, 2, 0, 1, 1, RANK="1")).mode == "worker"  # agrees: kept
    assert not DistEnv.from_environ({"TORCHELASTIC_RUN_ID": "old"}).under_launcher


OMPI_TWO_NODES = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4",
                  "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
BAD = [
    (slurm(2, 2, 0, 0, 0, SLURM_JOB_NODELIST="gpu[01-"), "SLURM_JOB_NODELIST='gpu[01-' is not a"),
    (slurm(4, 3, 0, 0, 0), "SLURM_NTASKS=3 disagrees with SLURM_NNODES=4"),
    (slurm(2, 2, 0, 0, 0, SLURM_JOB_NODELIST="gpu[01-03]"), "names 3 host(s), but SLURM_NNODES=2"),
    (slurm(2, 4, 0, 0, 0, SLURM_STEP_TASKS_PER_NODE="3(x2)"), "SLURM_STEP_TASKS_PER_NODE='3(x2)'"),
    (slurm(2, 4, 0, "x", 0), "SLURM_PROCID='x' is not an integer"),
    ({"PET_NNODES": "1:3", "PET_NPROC_PER_NODE": "2"}, "PET_NNODES='1:3' is an elastic range"),
    ({"PET_NNODES": "two"}, "PET_NNODES='two' is not a node count"),
    (OMPI_TWO_NODES, "export MASTER_ADDR"),
    ({"SKYPILOT_NODE_RANK": "3", "SKYPILOT_NUM_NODES": "2"}, "SKYPILOT_NODE_RANK=3"),
]


@pytest.mark.parametrize(("env", "said"), BAD)
def test_bad_variables_are_one_line_naming_the_variable(env, said):
    with pytest.raises(DpwiseError) as err:
        resolve({}, env)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_rendezvous_host_that_does_not_resolve_is_one_line_before_anything_starts():
    before = dict(os.environ)
    env = slurm(2, 4, 0, 0, 0, MASTER_ADDR="nosuchhost.invalid")
    said = r"environment variable MASTER_ADDR='nosuchhost.invalid' names host 'nosuchhost.inv"
    with pytest.raises(DpwiseError, match=said):
        meeting(resolve({}, env), env)
    env = slurm(2, 2, 0, 0, 0, SLURM_JOB_NODELIST="zz[1-2].invalid")
    said = r"SLURM_JOB_NODELIST='zz\[1-2\].invalid' names host 'zz1.invalid', which does not"
    with pytest.raises(DpwiseError, match=said):
        meeting(resolve({}, env), env)
    assert dict(os.environ) == before  # nothing exported

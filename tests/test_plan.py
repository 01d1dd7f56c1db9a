import pytest

from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.train.config import TrainConfig
from dpwise.train.plan import resolve

CPU = Hardware(cuda_devices=0, cpu_cores=2)
FOUR_GPUS = Hardware(cuda_devices=4, cpu_cores=32)


def test_batch_not_divisible_names_the_multiples():
    cfg = TrainConfig(strategy="ddp", nproc=4, batch_size=250)
    with pytest.raises(DpwiseError) as err:
        resolve(cfg, CPU, DistEnv())
    assert str(err.value) == (
        "--batch-size 250 is not divisible by world size 4; use a multiple of 4 (e.g. 248 or 252)"
    )


def test_nccl_without_cuda_is_refused():
    with pytest.raises(DpwiseError, match="--backend nccl needs CUDA"):
        resolve(TrainConfig(strategy="ddp", backend="nccl"), CPU, DistEnv())


def test_cuda_device_without_gpu_is_refused():
    with pytest.raises(DpwiseError, match="--device cuda needs a CUDA GPU"):
        resolve(TrainConfig(device="cuda"), CPU, DistEnv())


def test_more_gpu_workers_than_gpus_is_refused():
    with pytest.raises(DpwiseError, match="--nproc 8 asks for more GPU workers than the 4 GPUs"):
        resolve(TrainConfig(strategy="ddp", nproc=8), FOUR_GPUS, DistEnv())


def test_defaults_follow_the_hardware():
    cpu = resolve(TrainConfig(strategy="ddp"), CPU, DistEnv())
    assert (cpu.device_type, cpu.backend, cpu.nproc_per_node, cpu.launch) == (
        "cpu",
        "gloo",
        2,
        True,
    )
    gpu = resolve(TrainConfig(strategy="ddp"), FOUR_GPUS, DistEnv())
    assert (gpu.device_type, gpu.backend, gpu.nproc_per_node) == ("cuda", "nccl", 4)
    dp = resolve(TrainConfig(strategy="dp"), FOUR_GPUS, DistEnv())
    assert (dp.strategy.dp_devices, dp.world_size, dp.launch) == (4, 1, False)
    assert resolve(TrainConfig(strategy="dp"), CPU, DistEnv()).strategy.dp_devices == 0


def test_under_torchrun_the_launcher_decides_the_world():
    env = DistEnv(rank=1, local_rank=1, world_size=2, local_world_size=2, under_launcher=True)
    plan = resolve(TrainConfig(strategy="ddp", batch_size=256), CPU, env)
    assert (plan.launch, plan.world_size, plan.per_rank_batch) == (False, 2, 128)
    with pytest.raises(DpwiseError, match="conflicts with torchrun's 2 workers"):
        resolve(TrainConfig(strategy="ddp", nproc=4), CPU, env)
    with pytest.raises(DpwiseError, match="use --strategy ddp"):
        resolve(TrainConfig(strategy="single"), CPU, env)


def test_multi_node_world_size_counts_every_node():
    cfg = TrainConfig(strategy="ddp", nproc=4, nnodes=2, rdzv_endpoint="head:29400", batch_size=64)
    plan = resolve(cfg, FOUR_GPUS, DistEnv())
    assert (plan.world_size, plan.per_rank_batch) == (8, 8)

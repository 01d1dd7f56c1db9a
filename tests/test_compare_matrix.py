import pytest

from dpwise.compare.matrix import build_matrix
from dpwise.compare.settings import CompareConfig, parse_list
from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware

CPU = Hardware(cuda_devices=0, cpu_cores=2)
SIX_GPUS = Hardware(cuda_devices=6, cpu_cores=64)


def test_cpu_default_runs_single_dp_and_ddp_at_one_and_two():
    specs = build_matrix(CompareConfig(), CPU)
    assert [(s.id, s.world_size, s.launched) for s in specs] == [
        ("single", 1, False),
        ("dp", 1, False),
        ("ddp-1", 1, False),
        ("ddp-2", 2, True),
    ]
    assert specs[1].label == "dp (CPU pass-through)"


def test_gpu_default_world_sizes_double_up_to_the_gpu_count():
    specs = build_matrix(CompareConfig(batch_size=240), SIX_GPUS)
    assert [s.id for s in specs] == [
        "single",
        "dp-1",
        "dp-2",
        "dp-4",
        "dp-6",
        "ddp-1",
        "ddp-2",
        "ddp-4",
        "ddp-6",
    ]
    assert all(s.device_type == "cuda" for s in specs)


def test_single_is_always_the_reference():
    specs = build_matrix(CompareConfig(strategies=("ddp",), world_sizes=(2,)), CPU)
    assert [s.id for s in specs] == ["single", "ddp-2"]


def test_batch_must_divide_by_every_world_size():
    with pytest.raises(DpwiseError) as err:
        build_matrix(CompareConfig(world_sizes=(1, 2, 3), batch_size=256), CPU)
    assert "use a multiple of 6 so every world size in [1, 2, 3] divides it (e.g. 252 or 258)" in (
        str(err.value)
    )


def test_fsdp_runs_when_named_at_two_processes_or_more():
    specs = build_matrix(CompareConfig(strategies=("single", "ddp", "fsdp")), CPU)
    assert [(s.id, s.world_size, s.launched) for s in specs] == [
        ("single", 1, False),
        ("ddp-1", 1, False),
        ("ddp-2", 2, True),
        ("fsdp-2", 2, True),  # one process has nothing to shard over
    ]
    with pytest.raises(DpwiseError, match="--strategies fsdp needs a world size of at least 2"):
        build_matrix(CompareConfig(strategies=("fsdp",), world_sizes=(1,)), CPU)
    default = build_matrix(CompareConfig(world_sizes=(1,)), CPU)
    assert [s.id for s in default] == ["single", "dp", "ddp-1"]


def test_more_gpus_than_present_is_refused():
    with pytest.raises(DpwiseError, match="needs more GPUs than the 6"):
        build_matrix(CompareConfig(world_sizes=(8,)), SIX_GPUS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epochs": 1}, "--epochs must be at least 2 (the first is an untimed warm-up)"),
        ({"strategies": ("zero",)}, "--strategies zero: unknown"),
        ({"repeats": 0}, "--repeats must be at least 1"),
        ({"world_sizes": (0, 2)}, "--world-sizes must be positive"),
        ({"tolerance": 0.0}, "--tolerance must be positive"),
    ],
)
def test_settings_are_validated(kwargs, message):
    with pytest.raises(DpwiseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CompareConfig(**kwargs)


def test_parse_list():
    assert parse_list("1, 2,4", "--world-sizes", int) == (1, 2, 4)
    with pytest.raises(DpwiseError, match="not a comma-separated list of integers"):
        parse_list("1,two", "--world-sizes", int)

"""The strategy registry: each strategy's traits, one constructor, and a new strategy picked up
by plan, config, compare and the CLI without touching them."""

import pytest
import torch

from dpwise import strategies
from dpwise.cli import build_parser
from dpwise.compare.matrix import build_matrix
from dpwise.compare.settings import CompareConfig
from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies.ddp import DDPStrategy
from dpwise.strategies.dp import DataParallelStrategy
from dpwise.strategies.single import SingleStrategy
from dpwise.strategies.traits import OWN, VISIBLE, Traits
from dpwise.train import engine
from dpwise.train.config import TrainConfig
from dpwise.train.plan import resolve
from dpwise.workload.spec import workload_for

CPU = Hardware(cuda_devices=0, cpu_cores=2)
TWO_GPUS = Hardware(cuda_devices=2, cpu_cores=8)


def test_the_four_strategies_and_their_traits():
    assert strategies.names() == ("single", "dp", "ddp", "fsdp")
    assert strategies.reference() == "single"
    single, dp, ddp = (strategies.traits(n) for n in ("single", "dp", "ddp"))
    assert (single.multiprocess, single.process_group, single.devices) == (False, False, OWN)
    assert (dp.multiprocess, dp.process_group, dp.devices) == (False, False, VISIBLE)
    assert (ddp.multiprocess, ddp.process_group, ddp.devices) == (True, True, OWN)
    assert [t.reference for t in (single, dp, ddp)] == [True, False, False]
    assert set(ddp.options) == {"find_unused_parameters", "static_graph", "bucket_cap_mb",
                                "gradient_as_bucket_view", "comm_hook", "zero1"}  # fmt: skip
    assert single.options == dp.options == ()
    fsdp = strategies.traits("fsdp")
    assert (fsdp.multiprocess, fsdp.process_group, fsdp.devices) == (True, True, OWN)
    assert (fsdp.min_world_size, fsdp.shards_model, fsdp.reference) == (2, True, False)
    assert not any(strategies.traits(n).shards_model for n in ("single", "dp", "ddp"))


def test_one_constructor_builds_each_strategy_from_its_spec():
    env = DistEnv()
    built = {
        name: strategies.make_strategy(resolve(TrainConfig(strategy=name), CPU, env).strategy, env)
        for name in strategies.names()
        if strategies.traits(name).min_world_size == 1
    }
    assert type(built["single"]) is SingleStrategy and built["single"].device.type == "cpu"
    assert type(built["dp"]) is DataParallelStrategy and built["dp"].device_ids == []
    assert type(built["ddp"]) is DDPStrategy and built["ddp"].backend == "gloo"
    assert all(s.name == n for n, s in built.items())
    gpu_dp = resolve(TrainConfig(strategy="dp"), TWO_GPUS, DistEnv())
    assert DataParallelStrategy.from_spec(gpu_dp.strategy, DistEnv()).device_ids == [0, 1]
    ddp = resolve(TrainConfig(strategy="ddp", static_graph=True, timeout=7.0), CPU, DistEnv())
    made = strategies.make_strategy(ddp.strategy, DistEnv())
    assert made.options == {"static_graph": True} and made.timeout.total_seconds() == 7.0


def test_the_full_state_dict_is_the_plain_models_and_loads_back():
    dp = DataParallelStrategy(0)
    plain = torch.nn.Sequential(torch.nn.Linear(3, 2))
    wrapped = dp.wrap(plain)
    assert set(wrapped.state_dict()) == {"module.0.weight", "module.0.bias"}  # the wrapper's
    state = dp.full_state_dict(wrapped)
    assert set(state) == {"0.weight", "0.bias"}
    zeros = {k: torch.zeros_like(v) for k, v in state.items()}
    dp.load_full_state_dict(wrapped, zeros)
    assert all(int(torch.count_nonzero(p)) == 0 for p in plain.parameters())


def test_a_class_registered_under_another_name_is_refused():
    strategies.register("other", SingleStrategy)
    try:
        with pytest.raises(ValueError, match="declares 'single'"):
            strategies.traits("other")
    finally:
        strategies.unregister("other")


def test_an_unknown_name_is_one_line():
    with pytest.raises(DpwiseError, match="--strategy 'nope' is not one of single, dp, ddp"):
        strategies.traits("nope")


class Solo(SingleStrategy):
    """A new one-process strategy, as a newcomer would add it: traits and a constructor."""

    traits = Traits(name="solo", summary="test", multiprocess=False, process_group=False)
    name = traits.name


class Pair(DDPStrategy):
    """A new multi-process strategy that takes none of DDP's options."""

    traits = Traits(name="pair", summary="test", multiprocess=True, process_group=True)
    name = traits.name


@pytest.fixture
def new_strategies():
    strategies.register("solo", Solo)
    strategies.register("pair", Pair)
    yield
    strategies.unregister("solo")
    strategies.unregister("pair")


def test_a_new_strategy_reaches_config_plan_and_the_cli(new_strategies):
    assert strategies.names()[-2:] == ("solo", "pair")
    assert build_parser().parse_args(["train", "--strategy", "pair"]).strategy == "pair"
    plan = resolve(TrainConfig(strategy="pair", nproc=2), CPU, DistEnv())
    assert (plan.world_size, plan.backend, plan.launch) == (2, "gloo", True)
    assert type(strategies.make_strategy(plan.strategy, DistEnv())) is Pair
    with pytest.raises(DpwiseError, match="--nproc/--nnodes need --strategy ddp or fsdp or pair"):
        TrainConfig(strategy="solo", nproc=2)
    with pytest.raises(DpwiseError, match="needs --strategy ddp \\(got --strategy pair\\)"):
        TrainConfig(strategy="pair", find_unused_parameters=True)
    env = DistEnv(rank=1, local_rank=1, world_size=2, local_world_size=2, under_launcher=True)
    with pytest.raises(DpwiseError, match="use --strategy ddp or fsdp or pair or launch without"):
        resolve(TrainConfig(strategy="solo"), CPU, env)


def test_a_new_strategy_reaches_the_compare_matrix(new_strategies):
    cfg = CompareConfig(strategies=("pair", "solo"))
    specs = build_matrix(cfg, CPU)
    assert [(s.id, s.strategy, s.world_size, s.launched) for s in specs] == [
        ("single", "single", 1, False),
        ("solo", "solo", 1, False),
        ("pair-1", "pair", 1, False),
        ("pair-2", "pair", 2, True),
    ]
    assert cfg.train_config("pair", 2).nproc == 2
    assert cfg.train_config("solo", 2).nproc is None
    with pytest.raises(DpwiseError, match="divisible by world size 2"):
        build_matrix(CompareConfig(strategies=("pair",), batch_size=255), CPU)


def test_the_loop_trains_a_new_strategy_like_the_reference(new_strategies):
    def final(name: str) -> dict[str, torch.Tensor]:
        cfg = TrainConfig(strategy=name, max_steps=2, quiet=True)
        plan = resolve(cfg, CPU, DistEnv())
        strategy = strategies.make_strategy(plan.strategy, DistEnv())
        return engine.train(plan, strategy, workload_for(cfg)).state

    ours, reference = final("solo"), final("single")
    assert ours.keys() == reference.keys()
    assert all(torch.equal(ours[k], reference[k]) for k in ours)


def test_names_and_plain_configs_need_no_torch():
    """The CLI lists the strategies and validates a config before torch is imported (compare
    starts its fork server first); only a strategy's traits import its module. Nor does the
    command line import LibCST (migrate's and lint --fix's)."""
    import subprocess
    import sys

    code = (
        "import sys; from dpwise.cli import build_parser; "
        "from dpwise.train.config import TrainConfig; "
        "from dpwise.compare.settings import CompareConfig; "
        "build_parser().parse_args(['train', '--strategy', 'ddp']); "
        "TrainConfig(strategy='ddp'); CompareConfig(); "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'libcst' not in sys.modules, 'libcst imported'; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("hw", [CPU, Hardware(cuda_devices=6, cpu_cores=64)], ids=["cpu", "gpus"])
def test_compares_plans_are_resolved_as_trains_are(hw, monkeypatch):
    """Each run of the matrix gets what `dpwise train` would resolve for it on its own GPUs."""
    from dpwise.compare import worker

    monkeypatch.setattr(worker.Hardware, "detect", classmethod(lambda cls: hw))
    cfg = CompareConfig(batch_size=240)
    got = {}
    for spec in build_matrix(cfg, hw):
        plan = worker._plan(spec, cfg, DistEnv())
        got[spec.id] = (plan.device_type, plan.backend, plan.world_size, plan.strategy.dp_devices)
        assert plan.launch == spec.launched  # the parent of a run of several processes launches
    if hw is CPU:
        assert got == {
            "single": ("cpu", None, 1, 0),
            "dp": ("cpu", None, 1, 0),
            "ddp-1": ("cpu", "gloo", 1, 0),
            "ddp-2": ("cpu", "gloo", 2, 0),
        }
    else:
        assert got["single"] == ("cuda", None, 1, 0)
        assert [got[f"dp-{k}"] for k in (1, 2, 4, 6)] == [
            ("cuda", None, 1, k) for k in (1, 2, 4, 6)
        ]
        assert [got[f"ddp-{w}"] for w in (1, 2, 4, 6)] == [
            ("cuda", "nccl", w, 0) for w in (1, 2, 4, 6)
        ]

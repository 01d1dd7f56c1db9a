"""Each setting is declared once (dpwise.infra.settings): its flag, default, help and checks."""

import dataclasses
import math
from pathlib import Path

import pytest

from dpwise.advise.request import AdviseRequest
from dpwise.cli import COMMANDS as COMMAND_NAMES
from dpwise.cli import build_parser
from dpwise.compare.settings import CompareConfig
from dpwise.errors import DpwiseError
from dpwise.infra.env_settings import EnvRequest
from dpwise.infra.settings import flags_of, from_args
from dpwise.link.settings import ProbeLinkConfig
from dpwise.lint.settings import LintConfig
from dpwise.migrate.settings import MigrateConfig
from dpwise.train.config import TrainConfig
from dpwise.tune.space import TuneConfig
from dpwise.watch.settings import DiagnoseConfig, WatchConfig

COMMANDS = {
    "train": TrainConfig,
    "compare": CompareConfig,
    "advise": AdviseRequest,
    "env": EnvRequest,
    "lint": LintConfig,
    "migrate": MigrateConfig,
    "probe-link": ProbeLinkConfig,
    "tune": TuneConfig,
    "watch": WatchConfig,
    "diagnose": DiagnoseConfig,
}
# what a command needs on its command line (its positional arguments), as settings
REQUIRED = {
    "lint": {"paths": ("train.py",)},
    "migrate": {"script": Path("train.py")},
    "diagnose": {"folder": Path("runs/watch")},
}


def _parser(command: str):
    return next(a for a in build_parser()._actions if a.dest == "command").choices[command]


def test_every_command_has_its_settings_class():
    assert set(COMMANDS) == set(COMMAND_NAMES)


@pytest.mark.parametrize("command", COMMANDS)
def test_no_flags_give_the_dataclass_defaults(command):
    given = REQUIRED.get(command, {})
    argv = [
        str(v) for value in given.values() for v in (value if isinstance(value, tuple) else [value])
    ]
    args = build_parser().parse_args([command, *argv])
    assert from_args(COMMANDS[command], args) == COMMANDS[command](**given)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_is_a_setting_and_every_setting_a_flag(command):
    """A setting is declared once: each argument of the command comes from a field of its
    settings class, and each field that is a setting has its argument."""
    actions = [a for a in _parser(command)._actions if a.dest != "help"]
    settings = {f.name: f for f in dataclasses.fields(COMMANDS[command]) if "setting" in f.metadata}
    assert {a.dest for a in actions} == set(settings), command
    for action in actions:
        want = flags_of(settings[action.dest])
        assert tuple(action.option_strings or (action.dest,)) == want, action.dest


def test_flags_reach_the_settings_through_their_parse():
    args = build_parser().parse_args(
        ["compare", "--model-arg", "layers=4", "--strategies", "single,ddp", "--world-sizes", "1,2"]
    )
    cfg = from_args(CompareConfig, args)
    assert cfg.model_args == {"layers": 4}
    assert cfg.strategies == ("single", "ddp")
    assert cfg.world_sizes == (1, 2)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"lr": math.nan}, "--lr must be a finite number, got nan; e.g. --lr 0.01"),
        ({"lr": 0.0}, "--lr must be positive, got 0.0"),
        ({"precision": "fp8"}, "--precision 'fp8' is not one of fp32, bf16, fp16"),
        ({"max_steps": 0}, "--max-steps must be at least 1, got 0"),
        ({"timeout": 0.5}, "--timeout must be a number of seconds from 1 to"),
    ],
)
def test_a_setting_train_and_compare_share_is_checked_alike(kwargs, expected):
    for cls in (TrainConfig, CompareConfig):
        with pytest.raises(DpwiseError) as err:
            cls(**kwargs)
        assert str(err.value).startswith(expected), cls


def test_choices_are_checked_at_construction_too():
    with pytest.raises(DpwiseError, match="--loss 'l1' is not one of auto, cross-entropy"):
        TrainConfig(loss="l1")
    with pytest.raises(DpwiseError, match="--goal 'fast' is not one of prototype, production"):
        AdviseRequest(goal="fast")


def test_a_compare_run_gets_every_setting_compare_shares_with_train():
    given = {"model_args": {"layers": 2}, "epochs": 3, "lr": 0.5, "threads": 1, "timeout": 9.0}
    given |= {"max_steps": 4, "precision": "bf16", "optimizer": "adamw", "seed": 7}
    given |= {"device": "cpu", "batch_size": 128, "loss": "mse", "data": "synthetic"}
    run = CompareConfig(**given, out=Path("report")).train_config("single", None)
    assert {name: getattr(run, name) for name in given} == given
    assert run.out is None and run.quiet  # compare's report folder is not a run's

"""A user's command line read into what to run (userscript.command), and how the script trains
read from its text (userscript.kind): the guide's two scripts as published, and scripts in the
styles of public training code. Nothing runs."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from dpwise.errors import DpwiseError
from dpwise.userscript.command import parse
from dpwise.userscript.kind import launch_of

SEED_SCRIPTS = Path(__file__).parent / "lint_cases" / "guide"  # the guide's scripts as published


def write(folder: Path, name: str, code: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return path


@pytest.fixture
def train_py(tmp_path):
    return write(tmp_path, "train.py", "print('hello')\n")


@pytest.mark.parametrize(
    ("line", "launcher", "nproc", "args"),
    [
        ("train.py --epochs 1", "path", None, ("--epochs", "1")),
        ("python train.py --epochs 1", "python", None, ("--epochs", "1")),
        ("python3.11 -u -W ignore train.py", "python", None, ()),
        ("torchrun --nproc_per_node=2 train.py --lr 0.1", "torchrun", 2, ("--lr", "0.1")),
        ("torchrun --nproc-per-node 4 --standalone train.py", "torchrun", 4, ()),
        ("torchrun --nproc_per_node=gpu train.py", "torchrun", None, ()),
        ("python -m torch.distributed.run --nproc_per_node 2 train.py x", "torchrun", 2, ("x",)),
        ("OMP_NUM_THREADS=1 python train.py", "python", None, ()),
    ],
)
def test_each_spelling_of_a_launch_is_read(tmp_path, train_py, line, launcher, nproc, args):
    got = parse(line, cwd=tmp_path)
    assert (got.script, got.launcher, got.nproc, got.args) == (train_py, launcher, nproc, args)
    assert got.name == "train" and got.given == line


def test_the_variables_before_the_command_are_kept(tmp_path, train_py):
    assert parse("A=1 B= python train.py", cwd=tmp_path).env == {"A": "1", "B": ""}


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("python 'train.py", "does not parse as a command line (No closing quotation)"),
        ("", "names no command"),
        ("python missing.py", "missing.py does not exist"),
        ("python .", ". is a folder"),
        ("python -m pkg.train", "runs 'python -m pkg.train', not a script file"),
        ("python -c 'print(1)'", "runs 'python -c', not a script file"),
        ("torchrun -m pkg.train", "runs 'torchrun -m pkg.train', not a script file"),
        ("torchrun --nnodes 2 train.py", "--nnodes 2: compare runs on one node"),
        ("torchrun --bogus train.py", "torchrun does not take it: unrecognized arguments"),
        ("python -W", "python's -W needs a value"),
    ],
)
def test_a_command_that_cannot_run_is_one_line(tmp_path, train_py, line, said):
    with pytest.raises(DpwiseError) as err:
        parse(line, cwd=tmp_path)
    message = str(err.value)
    assert said in message and "\n" not in message
    assert message.startswith(f"--script {line!r}")


def test_the_guides_scripts_are_launched_as_they_train(tmp_path):
    for name in ("dp_train.py", "ddp_train.py", "common.py"):
        shutil.copy(SEED_SCRIPTS / name, tmp_path / name)
    dp = launch_of(parse("dp_train.py", cwd=tmp_path))
    ddp = launch_of(parse("python ddp_train.py", cwd=tmp_path))
    assert (dp.kind, dp.distributed) == ("dataparallel", False)
    assert (ddp.kind, ddp.distributed, ddp.line) == ("spawns", True, 39)  # mp.spawn(train, ...)


SCRIPTS = {
    # nanoGPT's style: the group from the environment, DDP, accumulation by no_sync's flag
    "accumulating.py": (
        "torchrun",
        """\
        import os, torch
        from torch.distributed import init_process_group
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = int(os.environ.get("RANK", -1)) != -1
        if ddp:
            init_process_group(backend="gloo")
        model = torch.nn.Linear(4, 1)
        if ddp:
            model = DDP(model)
        for micro in range(4):
            model.require_backward_grad_sync = micro == 3
        """,
    ),
    # the group from a helper of the project's own (src/utils style)
    "helper_group.py": (
        "torchrun",
        """\
        from dist_utils import setup
        if __name__ == "__main__":
            setup()
        """,
    ),
    "single.py": (
        "single",
        """\
        import torch
        if __name__ == "__main__":
            torch.nn.Linear(2, 2)(torch.ones(1, 2)).sum().backward()
        """,
    ),
    "functional_dp.py": (
        "dataparallel",
        """\
        import torch
        from torch.nn.parallel import data_parallel
        out = data_parallel(torch.nn.Linear(2, 2), torch.ones(4, 2))
        """,
    ),
    "spawner.py": (
        "spawns",
        """\
        import torch.multiprocessing as mp
        def work(rank):
            pass
        if __name__ == "__main__":
            mp.start_processes(work, nprocs=2, start_method="spawn")
        """,
    ),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_bare_script_is_launched_as_its_text_says(tmp_path, name):
    kind, code = SCRIPTS[name]
    write(tmp_path, "dist_utils.py", """\
        import torch.distributed as dist
        def setup():
            dist.init_process_group("gloo")
        """)  # fmt: skip
    write(tmp_path, name, code)
    assert launch_of(parse(name, cwd=tmp_path)).kind == kind
    # whatever the text, a torchrun command line is torchrun's
    assert launch_of(parse(f"torchrun {name}", cwd=tmp_path)).kind == "torchrun"
    # and a python one is one process, as it runs when typed (no torchrun: no RANK, no DDP in
    # nanoGPT's style); it spawns or wraps DataParallel by itself as it says
    by_python = "single" if kind == "torchrun" else kind
    assert launch_of(parse(f"python {name}", cwd=tmp_path)).kind == by_python


def test_a_script_that_is_not_python_is_one_line(tmp_path):
    write(tmp_path, "broken.py", "def f(:\n")
    with pytest.raises(DpwiseError, match=r"broken.py is not valid Python \(line 1: "):
        launch_of(parse("broken.py", cwd=tmp_path))

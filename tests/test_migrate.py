"""`dpwise migrate`: the planner's edits, the refusals, the command line, and that a migrated
script lints clean and trains the same model alone and under torchrun."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import child_env, free_port, load_state, max_abs_diff, run_cli
from dpwise.lint import lint_paths
from dpwise.migrate import MigrationRefused, migrate_source
from helpers_alone import run_alone

HERE = Path(__file__).parent / "fixtures_migrate"
GUIDE = Path(__file__).parent / "lint_cases" / "guide"  # the guide's scripts, as it prints them
RULES = {
    "missing-set-device",
    "ddp-before-init-process-group",
    "data-parallel-usage",
    "missing-distributed-sampler",
    "missing-set-epoch",
    "unguarded-rank-side-effect",
    "missing-destroy-process-group",
}


def migrated(tmp_path: Path, name: str) -> tuple[Path, list[str]]:
    for helper in [*HERE.glob("*.py"), GUIDE / "common.py", GUIDE / "dp_train.py"]:
        shutil.copy(helper, tmp_path / helper.name)
    result = migrate_source((tmp_path / name).read_text())
    out = tmp_path / name.replace(".py", "_ddp.py")
    out.write_text(result.code)
    return out, [edit.rule for edit in result.edits]


def warnings(path: Path) -> list[str]:
    return [f"{f.line}: {f.name}" for f in lint_paths([str(path)]) if f.at_least("warning")]


def test_guide_dp_train_lints_clean_after_migration(tmp_path):
    assert warnings(GUIDE / "dp_train.py")  # the original is flagged
    out, rules = migrated(tmp_path, "dp_train.py")
    ast.parse(out.read_text())
    assert set(rules) >= RULES
    assert warnings(out) == []
    code = out.read_text()
    assert "nn.DataParallel" not in code
    assert "loader = _distributed_loader(get_dataloader(batch_size=256))" in code
    assert "model = SimpleModel().to(device)" in code


def test_inline_loader_gets_a_sampler_and_the_saves_are_unwrapped(tmp_path):
    out, rules = migrated(tmp_path, "train_inline.py")
    assert warnings(out) == []
    assert "wrapped-state-dict" in rules
    code = out.read_text()
    assert "shuffle=False" in code and "sampler=train_sampler" in code
    sampler = code[code.index("train_sampler = DistributedSampler(") :].split("\n    )")[0]
    assert "dataset," in sampler and "shuffle=True" in sampler  # moved into the sampler
    assert 'torch.save(getattr(model, "module", model).state_dict(), out)' in code
    assert "train_loader.sampler.set_epoch(epoch)" in code


def test_comments_and_formatting_outside_the_edits_are_kept(tmp_path):
    original = (HERE / "train_inline.py").read_text().splitlines()
    out, _ = migrated(tmp_path, "train_inline.py")
    lines = out.read_text().splitlines()
    for kept in (
        "# The data and the model come from one seed, so every process builds the same ones.",
        "    for epoch in range(2):",
        "    dataset = TensorDataset(torch.randn(256, 20), torch.randint(0, 3, (256,)))",
    ):
        assert kept in original and kept in lines
    assert "        batch_size=_per_process_batch(32),  # the global batch" in lines
    wrap = lines.index("    model = (")
    assert lines[wrap + 1 : wrap + 3] == [
        "        DistributedDataParallel(",
        "            model.to(device),",
    ]
    assert lines[wrap + 7] == "    )  # wrap for all GPUs"


REFUSED = {
    "sampler": ("loader = DataLoader(ds, batch_size=8, sampler=my_sampler)", "`sampler=`"),
    "batch_sampler": ("loader = DataLoader(ds, batch_sampler=bs)", "`batch_sampler=`"),
    "iterable": ("class Stream(IterableDataset):\n    pass", "IterableDataset"),
    "model_parallel": (
        "model.enc.to('cuda:0')\nmodel.dec.to('cuda:1')",
        "several devices (cuda:0, cuda:1)",
    ),
    "spawn": ("mp.spawn(train, nprocs=2)", "starts its own processes"),
    "process": ("p = torch.multiprocessing.Process(target=train)", "starts its own processes"),
    "ddp": ("dist.init_process_group('gloo')", "already uses `init_process_group`"),
}
BASE = """\
import torch
from torch import nn
model = nn.DataParallel(nn.Linear(2, 2)).cuda()
"""


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsafe_patterns_are_refused_with_their_reason(case):
    snippet, reason = REFUSED[case]
    with pytest.raises(MigrationRefused) as refused:
        migrate_source(BASE + snippet + "\n")
    assert len(refused.value.reasons) == 1
    assert reason in refused.value.reasons[0] and refused.value.reasons[0].startswith("line ")


def test_refusal_lists_every_reason_writes_nothing_and_exits_2(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BASE + REFUSED["spawn"][0] + "\n" + REFUSED["sampler"][0] + "\n")
    out = tmp_path / "out.py"
    done = run_cli("migrate", str(script), "-o", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith(f"{script}: not migrated: ") for line in lines)
    assert not out.exists()


def test_nothing_to_migrate_is_refused():
    with pytest.raises(MigrationRefused, match="nothing to migrate"):
        migrate_source("print('hello')\n")


def test_cli_diff_and_edit_list(tmp_path):
    done = run_cli("migrate", str(GUIDE / "dp_train.py"), "--diff")
    assert done.returncode == 0, done.stderr
    assert "+    rank, world_size, local_rank, device = _dist_setup()\n" in done.stdout
    assert "-    dp_model = nn.DataParallel(model, device_ids=device_ids)\n" in done.stdout
    for rule in RULES:
        assert f"  {rule} " in done.stderr


def test_cli_out_writes_the_migrated_script(tmp_path):
    out = tmp_path / "ddp.py"
    done = run_cli("migrate", str(GUIDE / "dp_train.py"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == migrate_source((GUIDE / "dp_train.py").read_text()).code
    assert f"written to {out}" in done.stdout


@pytest.mark.slow
def test_migrated_script_trains_the_same_model_alone_and_under_torchrun(tmp_path):
    out, _ = migrated(tmp_path, "train_inline.py")
    alone, two = tmp_path / "alone.pt", tmp_path / "two.pt"
    assert run_alone(out, str(alone)) == 0  # `python out alone.pt`, forked: helpers_alone
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        str(out),
        str(two),
    ]
    done = subprocess.run(
        launch, env=child_env(), timeout=300, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "global batch 32 kept: 16 per process x 2 processes" in done.stdout
    assert done.stdout.count("epoch 1 ") == 1  # printed by rank 0 only
    assert set(load_state(alone)) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert max_abs_diff(load_state(alone), load_state(two)) < 1e-5


@pytest.mark.slow
def test_verify_proves_the_guide_script_trains_the_same_model(tmp_path, run_here):
    out = tmp_path / "dp_train_ddp.py"
    done = run_here("migrate", str(GUIDE / "dp_train.py"), "-o", str(out), "--verify")
    assert done.returncode == 0, done.stderr
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("verify: same model: after 4 steps")
    assert "(tolerance 1e-05)" in verdict
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dp_train_ddp.py"]  # nothing else left


@pytest.mark.slow
def test_verify_catches_a_migration_that_doubles_the_global_batch():
    from dpwise.migrate.verify import verify

    original = GUIDE / "dp_train.py"
    code = migrate_source(original.read_text()).code
    # every process takes the whole global batch from its half of the data: global batch x 2
    broken = code.replace("_per_process_batch(loader.batch_size)", "loader.batch_size")
    assert broken != code
    verdict = verify(original, broken, steps=2, original_nproc=1)  # each process trains alone
    assert verdict.moved > 1e-4
    assert not verdict.same and verdict.max_abs_diff > 1e-5


def test_single_process_script_gets_ddp_and_its_logging_is_guarded(tmp_path):
    out, rules = migrated(tmp_path, "flat_single.py")
    assert warnings(out) == []
    lines = out.read_text().splitlines()
    wrap = lines.index("model = nn.Linear(8, 2).to(device)") + 1
    assert lines[wrap : wrap + 3] == ["model = (", "    DistributedDataParallel(", "        model,"]
    assert lines[wrap + 5 : wrap + 8] == ["    if dist.is_initialized()", "    else model", ")"]
    logged = lines.index('        logger.info("epoch %d", epoch)')
    assert lines[logged - 1] == "    if is_main_process():"
    assert rules.count("unguarded-rank-side-effect") == 2 and "wrapped-state-dict" in rules


@pytest.mark.slow
def test_verify_single_process_script(tmp_path, run_here):
    done = run_here(
        "migrate", str(HERE / "flat_single.py"), "--verify", "--script-args", "final.pt"
    )
    assert done.returncode == 0, done.stderr
    assert "verify: same model: after 4 steps" in done.stderr


def test_the_scripts_own_device_gives_way_to_the_process_device():
    script = textwrap.dedent("""\
        import torch
        from torch import nn

        def main():
            device = torch.device("cuda:0")  # the user choice
            model = nn.DataParallel(nn.Linear(2, 2).to(device))
            for epoch in range(1):
                pass

        main()
        """)
    lines = migrate_source(script).code.splitlines()
    mine = lines.index('    device = torch.device("cuda:0")  # the user choice')
    assert lines[mine + 1] == "    rank, world_size, local_rank, device = _dist_setup()"

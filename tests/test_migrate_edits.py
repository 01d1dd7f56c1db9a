"""The planner's placements and edits on small scripts: where the set-up and the teardown go,
set_epoch for loaders reached indirectly, no_sync for accumulation, conditions around the wrap,
checkpoints loaded into the unwrapped model. No process is started."""

from __future__ import annotations

import ast
import textwrap

import pytest

from dpwise.migrate import MigrationRefused, migrate_source


def migrate(text: str) -> str:
    code = migrate_source(textwrap.dedent(text)).code
    ast.parse(code)
    return code


def body_of(code: str, function: str) -> str:
    tree = ast.parse(code)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    return ast.unparse(node)


def test_set_up_goes_into_the_function_that_wraps_and_teardown_around_an_exiting_main():
    code = migrate(
        """
        import sys
        import torch
        import torch.nn as nn

        def main():
            \"\"\"Train.\"\"\"
            model = nn.DataParallel(nn.Linear(4, 2)).cuda()
            return 0

        if __name__ == "__main__":
            sys.exit(main())
        """
    )
    main = body_of(code, "main")
    assert main.index('"""Train."""') < main.index("_dist_setup()")
    tree = ast.parse(code)
    assert not any(
        isinstance(n, ast.Assign) and "_dist_setup" in ast.unparse(n) for n in tree.body
    ), "set-up at module level runs on import"
    guard = tree.body[-1]
    assert isinstance(guard, ast.If) and isinstance(guard.body[0], ast.Try)
    assert "_dist_teardown()" in ast.unparse(guard.body[0].finalbody)


def test_a_main_guard_on_one_line_is_torn_down_after_not_inside():
    """`if __name__ == "__main__": main()` holds no statement to insert beside (migrate
    crashed on it with a TypeError from libcst): the teardown follows the `if`."""
    code = migrate(
        """
        import torch.nn as nn

        def main():
            model = nn.DataParallel(nn.Linear(4, 2)).cuda()

        if __name__ == "__main__": main()
        """
    )
    tree = ast.parse(code)
    guard, teardown = tree.body[-2:]
    assert isinstance(guard, ast.If) and ast.unparse(guard.body) == "main()"
    assert "_dist_teardown()" in ast.unparse(teardown)
    assert "_dist_setup()" in body_of(code, "main")


def test_set_epoch_reaches_a_global_loader_read_by_a_called_function():
    code = migrate(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        trainloader = DataLoader(trainset, batch_size=32, shuffle=True)
        net = nn.DataParallel(nn.Linear(4, 2).cuda())

        def train(epoch):
            for x, y in trainloader:
                net(x).sum().backward()

        for epoch in range(3, 10):
            train(epoch)
        """
    )
    assert "trainloader.sampler.set_epoch(epoch)" in code
    assert "trainsampler = DistributedSampler(" in code and "sampler=trainsampler" in code


def test_a_while_loop_over_passes_counts_them_with_next_epoch():
    code = migrate(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(data, batch_size=8, shuffle=True)
        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        step = 0
        while step < 100:
            for x, y in loader:
                step += 1
        """
    )
    loop = code[code.index("while step < 100:") :]
    assert loop.splitlines()[1].strip() == "_next_epoch(loader)"
    assert "def _next_epoch(loader):" in code
    assert "def _no_sync_unless" not in code, "an optional helper the edits do not call"


def test_accumulation_runs_the_micro_steps_under_no_sync():
    code = migrate(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(data, batch_size=8, shuffle=True)
        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        for epoch in range(2):
            for i, (x, y) in enumerate(loader):
                loss = model(x).sum() / 4
                loss.backward()
                if (i + 1) % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    )
    assert "_sync = (i + 1) % 4 == 0" in code
    block = code[code.index("with _no_sync_unless(model, _sync):") :]
    assert block.splitlines()[2].strip() == "loss.backward()"


def test_accumulation_whose_condition_the_micro_step_sets_is_left_alone():
    code = migrate(
        """
        import torch.nn as nn

        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        for epoch in range(2):
            for x, y in loader:
                loss = model(x).sum()
                seen = seen + 1
                loss.backward()
                if seen % 4 == 0:
                    optimizer.step()
        """
    )
    assert "_no_sync_unless" not in code


@pytest.mark.parametrize("test", ["torch.cuda.device_count() > 1", "n_gpu > 1", 'device == "cuda"'])
def test_a_device_condition_no_longer_decides_the_wrap(test):
    code = migrate(
        f"""
        import torch
        import torch.nn as nn

        model = nn.Linear(4, 2).cuda()
        if {test}:
            model = nn.DataParallel(model)
        """
    )
    assert f"if {test}:" not in code
    tree = ast.parse(code)
    assert any(
        isinstance(n, ast.Assign) and "DistributedDataParallel" in ast.unparse(n) for n in tree.body
    ), "the wrap is not at the top level"


def test_the_wrap_moves_out_of_a_device_condition_that_does_more():
    code = migrate(
        """
        import torch
        import torch.nn as nn

        model = nn.Linear(4, 2)
        if torch.cuda.is_available():
            where = torch.cuda.current_device()
            model = nn.DataParallel(model).to(where)
        """
    )
    guard = code[code.rindex("if torch.cuda.is_available():") :]
    assert guard.splitlines()[1].strip() == "where = torch.cuda.current_device()"
    assert guard.splitlines()[2] == "model = ("


def test_checkpoints_load_into_and_save_from_the_unwrapped_model():
    code = migrate(
        """
        import torch
        import torch.nn as nn

        net = nn.DataParallel(nn.Linear(4, 2).cuda())
        net.load_state_dict(torch.load("ckpt.pth")["net"])
        torch.save({"net": net.state_dict()}, "ckpt.pth")
        """
    )
    assert 'getattr(net, "module", net).load_state_dict(' in code
    assert '{"net": getattr(net, "module", net).state_dict()}' in code


def test_a_dataloader_over_an_expression_is_rebuilt_not_built_twice():
    code = migrate(
        """
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        """
    )
    assert code.count("TensorDataset(x, y)") == 1
    assert "_distributed_loader(" in code


def test_spawn_imported_under_another_name_is_refused():
    with pytest.raises(MigrationRefused) as refused:
        migrate(
            """
            import torch.nn as nn
            from torch.multiprocessing import spawn as launch

            def work(rank):
                nn.DataParallel(nn.Linear(4, 2)).cuda()

            launch(work, nprocs=2)
            """
        )
    assert any("`launch`" in r for r in refused.value.reasons)


def test_long_lines_the_migration_writes_are_wrapped():
    code = migrate(
        """
        import torch.nn as nn
        from torch.utils.data import DataLoader

        train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        """
    )
    user = code[code.index("train_sampler = ") :]
    assert max(len(line) for line in user.splitlines()) <= 100


def test_migrate_never_replaces_a_device_or_pipe_given_as_out(tmp_path, run_here):
    """The pipe through a fresh process; the other two refusals in this one (dpwise.cli.main)."""
    import os

    from conftest import run_cli

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    script = tmp_path / "train.py"
    script.write_text("import torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2)).cuda()\n")
    done = run_cli("migrate", str(script), "-o", str(pipe))
    assert done.returncode == 2 and "not a regular file" in done.stderr
    assert pipe.is_fifo()
    same = run_here("migrate", str(script), "-o", str(script))
    assert same.returncode == 2 and "the script itself" in same.stderr
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    done = run_here("migrate", str(binary))
    assert done.returncode == 2 and "not UTF-8" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_plain_random_sampler_is_shuffle_and_becomes_a_distributed_one():
    code = migrate(
        """
        import torch.nn as nn
        from torch.utils.data import DataLoader, RandomSampler

        train_loader = DataLoader(train_set, sampler=RandomSampler(train_set), batch_size=32)
        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        """
    )
    sampler = code[code.index("train_sampler = DistributedSampler(") :].split("\n)")[0]
    assert "shuffle=True" in sampler
    assert "sampler=train_sampler" in code and "RandomSampler(train_set)" not in code
    with pytest.raises(MigrationRefused):
        migrate(
            """
            import torch.nn as nn
            from torch.utils.data import DataLoader, RandomSampler

            loader = DataLoader(ds, sampler=RandomSampler(ds, replacement=True), batch_size=8)
            model = nn.DataParallel(nn.Linear(4, 2)).cuda()
            """
        )


def test_what_lint_calls_a_write_runs_on_rank_zero_after_migration():
    code = migrate(
        """
        import json
        import torch.nn as nn

        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        model.module.save_pretrained("out")
        json.dump({"done": True}, open("meta.json", "w"))
        """
    )
    lines = code.splitlines()
    for part in ('.save_pretrained("out")', 'json.dump({"done": True}'):
        at = next(i for i, line in enumerate(lines) if part in line)
        assert lines[at - 1].strip() == "if is_main_process():", part


def test_the_wrappers_module_is_reached_both_alone_and_under_torchrun():
    code = migrate(
        """
        import torch.nn as nn

        model = nn.DataParallel(nn.Linear(4, 2)).cuda()
        model.module.save_pretrained("out")
        size = model.module.weight.shape
        raw = model.module if hasattr(model, "module") else model
        """
    )
    assert 'getattr(model, "module", model).save_pretrained("out")' in code
    assert 'size = getattr(model, "module", model).weight.shape' in code
    assert 'raw = model.module if hasattr(model, "module") else model' in code

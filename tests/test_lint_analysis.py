"""The shared analysis behind the lint rules: names, guards, call flow and wrapper tracking."""

from __future__ import annotations

import ast
import textwrap

import pytest

from dpwise.lint import lint_source
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.guards import NOT_RANK0, OTHER, RANK0, classify


def ctx_of(source: str) -> FileContext:
    source = textwrap.dedent(source)
    return FileContext("t.py", source, ast.parse(source))


def names(source: str, select: list[str] | None = None) -> list[tuple[int, str]]:
    from dpwise.lint.rules import selected

    findings = lint_source(textwrap.dedent(source), rules=selected(select, None))
    return [(f.line, f.name) for f in findings]


# -- names --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header, call",
    [
        ("from torch.nn.parallel import DistributedDataParallel as DDP", "DDP(m)"),
        ("import torch.nn.parallel as par", "par.DistributedDataParallel(m)"),
        ("from torch import nn", "nn.parallel.DistributedDataParallel(m)"),
        ("import torch", "torch.nn.parallel.distributed.DistributedDataParallel(m)"),
        ("from torch.nn import parallel", "parallel.DistributedDataParallel(m)"),
        ("", "DDP(m)"),  # tutorial snippet with the import left out
    ],
)
def test_ddp_resolves_through_aliases(header: str, call: str) -> None:
    ctx = ctx_of(f"{header}\nmodel = {call}\n")
    assert len(ctx.ddp_calls) == 1


def test_a_name_the_file_binds_is_not_a_conventional_alias() -> None:
    source = """\
    def wrap(nn, model):
        return nn.DataParallel(model)
    class DDP:
        pass
    x = DDP()
    """
    ctx = ctx_of(source)
    assert ctx.ddp_calls == []
    assert names(source) == []


# -- guards -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "test, kind",
    [
        ("rank == 0", RANK0),
        ("0 == args.local_rank", RANK0),
        ("dist.get_rank() == 0", RANK0),
        ("torch.distributed.get_rank() == 0", RANK0),
        ('int(os.environ["RANK"]) == 0', RANK0),
        ('os.environ.get("LOCAL_RANK", "0") == "0"', RANK0),
        ("local_rank in (-1, 0)", RANK0),
        ("args.local_rank in [-1, 0]", RANK0),
        ("not rank", RANK0),
        ("is_main", RANK0),
        ("self.is_master", RANK0),
        ("master_process", RANK0),
        ("is_main_process()", RANK0),
        ("accelerator.is_main_process", RANK0),
        ("trainer.is_global_zero", RANK0),
        ("master_process and it % 10 == 0", RANK0),
        ("not args.distributed or args.rank % ngpus == 0", RANK0),
        ("rank != 0", NOT_RANK0),
        ("dist.get_rank() > 0", NOT_RANK0),
        ("not is_main", NOT_RANK0),
        ("rank", NOT_RANK0),
        ("node_rank == 0", OTHER),
        ("epoch == 0", OTHER),
        ("rank == 1", OTHER),
        ("world_size > 1", OTHER),
        ("ranks == 0", OTHER),
    ],
)
def test_guard_classification(test: str, kind: int) -> None:
    assert classify(ast.parse(test, mode="eval").body) == kind


DDP_HEADER = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
"""


def side_effects(body: str) -> list[int]:
    source = DDP_HEADER + textwrap.dedent(body)
    return [line for line, _ in names(source, ["unguarded-rank-side-effect"])]


def test_early_exit_guards_the_rest_of_the_block() -> None:
    assert side_effects(
        """\
            def finish(model):
                torch.save(model.module.state_dict(), "a.pt")
                if dist.get_rank() != 0:
                    return
                torch.save(model.module.state_dict(), "b.pt")
            dist.init_process_group("gloo")
            finish(DDP(torch.nn.Linear(2, 2)))
            """
    ) == [5]


def test_else_of_a_non_zero_rank_test_is_guarded() -> None:
    body = """\
    dist.init_process_group("gloo")
    if dist.get_rank() != 0:
        dist.barrier()
    else:
        torch.save({}, "x.pt")
    torch.save({}, "y.pt")
    """
    assert side_effects(body) == [9]


def test_helper_guarded_only_when_every_call_site_is() -> None:
    body = """\
    def save(state):
        torch.save(state, "ckpt.pt")
    def main(rank):
        dist.init_process_group("gloo")
        if rank == 0:
            save({})
        CALL
    if __name__ == "__main__":
        main(0)
    """
    assert side_effects(body.replace("CALL", "pass")) == []
    assert side_effects(body.replace("CALL", "save({})")) == [5]


def test_spawn_target_runs_on_every_rank() -> None:
    body = """\
    import torch.multiprocessing as mp
    def worker(rank):
        dist.init_process_group("gloo", rank=rank, world_size=2)
        torch.save({}, "x.pt")
    mp.spawn(worker, nprocs=2)
    """
    assert side_effects(body) == [7]


def test_prints_without_metrics_are_progress_not_results() -> None:
    body = """\
    dist.init_process_group("gloo")
    print("starting training")
    print(f"epoch {3} done")
    print(f"loss {0.5:.3f}")
    """
    assert side_effects(body) == [7]


def test_a_single_process_assertion_guards_the_rest_of_its_block() -> None:
    body = """\
    dist.init_process_group("gloo")
    def evaluate(args, distributed, world_size):
        if args.test:
            assert not distributed, "one process"
            torch.save({}, "a.pt")
        if args.eval:
            assert world_size == 1
            torch.save({}, "b.pt")
        torch.save({}, "c.pt")
    evaluate(None, False, 1)
    """
    assert side_effects(body) == [12]


def test_print_silencers_follow_same_module_helpers() -> None:
    from dpwise.lint.analysis.project import print_silencers

    ctx = ctx_of(
        """\
        import builtins
        def _quiet(is_main):
            builtins.print = lambda *a, **k: None
        def init_mode(args):
            _quiet(args.rank == 0)
        def unrelated():
            pass
        """
    )
    assert print_silencers(ctx) == {"_quiet", "init_mode"}


def test_a_path_variable_carries_the_rank_only_in_its_own_scope() -> None:
    body = """\
    import os
    dist.init_process_group("gloo")
    def shard(rank):
        name = "part" + str(rank)
        path = os.path.join("out", name + ".pt")
        torch.save({}, path)
    def final():
        path = "final.pt"
        torch.save({}, path)
    shard(0)
    final()
    """
    assert side_effects(body) == [12]


# -- flow through same-file functions -------------------------------------------------------------
def init_order(body: str) -> list[int]:
    source = DDP_HEADER + textwrap.dedent(body)
    return [line for line, _ in names(source, ["ddp-before-init-process-group"])]


def test_init_found_through_a_chain_of_helpers() -> None:
    body = """\
    def _init():
        dist.init_process_group("gloo")
    def setup():
        _init()
    def main():
        setup()
        return DDP(torch.nn.Linear(2, 2))
    if __name__ == "__main__":
        main()
    """
    assert init_order(body) == []


def test_recursion_in_helpers_terminates() -> None:
    body = """\
    def a(n):
        return b(n - 1) if n else None
    def b(n):
        return a(n)
    def main():
        a(3)
        return DDP(torch.nn.Linear(2, 2))
    if __name__ == "__main__":
        main()
    """
    assert init_order(body) == [10]


def test_ddp_builder_judged_at_its_call_sites() -> None:
    body = """\
    def wrap(m):
        return DDP(m)
    def good():
        dist.init_process_group("gloo")
        return wrap(torch.nn.Linear(2, 2))
    def bad():
        return wrap(torch.nn.Linear(2, 2))
    if __name__ == "__main__":
        FIRST()
        SECOND()
    """
    # bad() before good(): no process group yet when bad() wraps
    assert init_order(body.replace("FIRST", "bad").replace("SECOND", "good")) == [5]
    # good() ran first, so the group exists by the time bad() wraps
    assert init_order(body.replace("FIRST", "good").replace("SECOND", "bad")) == []


def test_method_builders_and_constructors_are_followed() -> None:
    body = """\
    class Trainer:
        def __init__(self):
            self.setup()
            self.model = DDP(torch.nn.Linear(2, 2))
        def setup(self):
            dist.init_process_group("gloo")
    if __name__ == "__main__":
        Trainer()
    """
    assert init_order(body) == []


# -- wrapper tracking -----------------------------------------------------------------------------
def state_dicts(body: str) -> list[int]:
    source = DDP_HEADER + textwrap.dedent(body)
    return [line for line, _ in names(source, ["wrapped-state-dict"])]


def test_wrapper_followed_into_a_helper_through_its_parameter() -> None:
    body = """\
    def save(net, path):
        torch.save(net.state_dict(), path)
    plain = torch.nn.Linear(2, 2)
    save(plain, "plain.pt")
    save(DDP(plain), "wrapped.pt")
    """
    assert state_dicts(body) == [5]


def test_reassignment_unwraps() -> None:
    body = """\
    model = DDP(torch.nn.Linear(2, 2))
    torch.save(model.state_dict(), "a.pt")
    model = model.module
    torch.save(model.state_dict(), "b.pt")
    """
    assert state_dicts(body) == [5]


def test_state_dict_not_saved_is_not_reported() -> None:
    body = """\
    model = DDP(torch.nn.Linear(2, 2))
    keys = list(model.state_dict())
    model.load_state_dict(model.state_dict())
    """
    assert state_dicts(body) == []


# -- columns ------------------------------------------------------------------------------------
def test_columns_count_characters_not_bytes() -> None:
    source = 'import os\nétiquette = 1; os.environ["MASTER_PORT"] = "29500"\n'
    (finding,) = lint_source(source)
    assert (finding.line, finding.col) == (2, 16)


# -- scripts and libraries ----------------------------------------------------------------------
def test_library_that_initialises_for_its_caller_is_not_asked_to_destroy() -> None:
    library = """\
    import torch.distributed as dist
    def ensure_group():
        if not dist.is_initialized():
            dist.init_process_group("gloo")
    """
    assert names(library) == []
    script = textwrap.dedent(library) + 'if __name__ == "__main__":\n    ensure_group()\n'
    assert names(script) == [(4, "missing-destroy-process-group")]


def test_function_handed_to_something_other_than_spawn_is_not_judged() -> None:
    body = """\
    import torch.distributed.rpc as rpc
    class Worker:
        def __init__(self):
            self.model = DDP(torch.nn.Linear(2, 2))
    def main():
        rpc.init_rpc("trainer", rank=0, world_size=2)
        rpc.remote("ps", Worker)
    if __name__ == "__main__":
        main()
    """
    assert init_order(body) == []
    spawned = body.replace('rpc.remote("ps", Worker)', "torch.multiprocessing.spawn(Worker)")
    assert init_order(spawned) == [7]


def test_the_docs_generate_a_page_for_every_rule() -> None:
    """The rule pages are generated from each rule's own docs when the site is built."""
    import runpy
    from pathlib import Path

    from dpwise.lint import RULES

    script = Path(__file__).resolve().parent.parent / "docs" / "gen_rule_pages.py"
    gen = runpy.run_path(str(script), run_name="gen_rule_pages")
    index = gen["index_page"]()
    assert all(f"[`{r.name}`]({r.name}.md)" in index and r.code in index for r in RULES)
    assert all(r.docs.strip() in gen["rule_page"](r) for r in RULES)


def test_a_set_up_helper_in_the_projects_package_is_followed_from_a_scripts_folder(tmp_path):
    """repo/scripts/train.py imports repo/pkg/dist_util.py (installed with the project); the
    script itself never names torch, but its helper creates the process group it never destroys."""
    from dpwise.lint import lint_paths

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "dist_util.py").write_text(
        "import torch.distributed as dist\n\n\n"
        "def setup_dist():\n    dist.init_process_group('gloo', init_method='env://')\n"
    )
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.py"
    script.write_text(
        "from pkg import dist_util\n\n\n"
        "def main():\n    dist_util.setup_dist()\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    names = [f.name for f in lint_paths(str(script))]
    assert names == ["missing-destroy-process-group"]

"""`dpwise migrate --verify` names what in the model makes the runs differ by design (BatchNorm,
random layers), says plainly when nothing does, and fails in one line when a run fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from dpwise.diagnosis.layers import Layer
from dpwise.migrate.text import render_verdict
from dpwise.migrate.verify import Verdict
from dpwise.userscript.causes import Watch, owning_models
from dpwise.userscript.run import cause

SCRIPT = Path(__file__).parent / "fixtures_migrate" / "dp_layers.py"


def verdict(diff: float, **causes) -> Verdict:
    return Verdict(steps=4, nproc=2, max_abs_diff=diff, moved=0.04, **causes)


def test_same_model_is_one_line():
    text = render_verdict(verdict(3e-8, batchnorm=(Layer("bn", "BatchNorm1d"),)))
    assert text.startswith("verify: same model: after 4 steps")
    assert "\n" not in text and "BatchNorm" not in text


def test_a_difference_with_causes_names_them_and_is_no_migration_error():
    bn = tuple(Layer(f"layer{i}.bn", "BatchNorm2d") for i in range(2))
    text = render_verdict(verdict(8e-3, batchnorm=bn, stochastic=(Layer("head.drop", "Dropout"),)))
    head, *why = text.splitlines()
    assert head.startswith("verify: DIFFERENT models, as expected for this model: after 4 steps")
    assert "differ by at most 8.00e-03 (tolerance 1e-05)" in head
    assert why[0].startswith("  BatchNorm (2 BatchNorm2d layers: layer0.bn, layer1.bn): ")
    assert "SyncBatchNorm.convert_sync_batchnorm" in why[0]
    assert why[1].startswith("  random layers (1 Dropout layer: head.drop; found by running")
    assert "not a migration error" in why[2]


def test_a_difference_without_cause_says_so_and_where_to_look():
    head, why = render_verdict(verdict(2e-2)).splitlines()
    assert head.startswith("verify: DIFFERENT models: after 4 steps")
    assert "as expected" not in head
    assert why.startswith("  Nothing in the model explains it: no BatchNorm and no random layer")
    assert "data order" in why and "reduction='mean'" in why
    assert "raise --verify-steps" in render_verdict(verdict(2e-2, found_by="class"))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
        self.frozen = nn.BatchNorm1d(8).eval()
        self.synced = nn.SyncBatchNorm(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = self.frozen(self.body(x))
        return self.head(h * (torch.rand_like(h) > 0.1))  # noise drawn in the model's own forward


def _train(watch: Watch | None) -> torch.Tensor:
    torch.manual_seed(0)
    model = nn.DataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if watch is not None:
        watch.start(optimizer)
    outputs = [model(torch.randn(6, 4)) for _ in range(2)]
    return torch.cat(outputs)


def test_watch_finds_the_model_and_its_causes_without_changing_what_it_computes():
    watch = Watch()
    watched = _train(watch)
    assert [type(m).__name__ for m in watch.models] == ["Net"]  # unwrapped, the outermost
    causes = watch.causes()
    assert causes["batchnorm"] == [{"name": "body.1", "kind": "BatchNorm1d"}]  # not eval, not sync
    assert causes["stochastic"] == [
        {"name": "", "kind": "Net"},
        {"name": "body.2", "kind": "Dropout"},
    ]
    assert causes["found_by"] == "running"
    assert torch.equal(watched, _train(None))


def test_without_a_watched_forward_random_layers_are_found_by_class():
    model = Net()
    watch = Watch()
    watch.start(torch.optim.SGD(model.parameters(), lr=0.1))
    causes = watch.causes()
    assert causes["found_by"] == "class"
    assert causes["stochastic"] == [{"name": "body.2", "kind": "Dropout"}]
    assert owning_models(torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1)) == []


def test_a_model_off_the_cpu_is_not_watched():
    model = Net().to("meta")
    watch = Watch()
    watch.start(torch.optim.SGD(model.parameters(), lr=0.1))
    model(torch.randn(6, 4, device="meta"))
    assert watch.causes()["found_by"] == "class"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "named"),
    [("batchnorm", "  BatchNorm (1 BatchNorm1d layer: 1): "), ("dropout", "  random layers (1 ")],
)
def test_verify_names_the_layer_that_makes_the_runs_differ(tmp_path, run_here, kind, named):
    out = tmp_path / "ddp.py"
    done = run_here("migrate", str(SCRIPT), "-o", str(out), "--verify", "--script-args", kind)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("verify: "))
    assert lines[head].startswith("verify: DIFFERENT models, as expected for this model")
    assert lines[head + 1].startswith(named)
    assert "not a migration error" in lines[-1]
    assert out.exists()


FAILED = {
    "crash": "failed under torchrun (rank 0, dp_layers.py line 27: RuntimeError: the data file is "
    "corrupt); run it by hand to "
    "see why",
    "nostep": "did not reach 4 steps under torchrun: it ended without an optimizer step "
    "(no optimizer.step() was reached)",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FAILED))
def test_a_run_that_fails_or_never_steps_is_one_line_exit_2_and_nothing_written(
    tmp_path, run_here, kind
):
    out = tmp_path / "ddp.py"
    done = run_here("migrate", str(SCRIPT), "-o", str(out), "--verify", "--script-args", kind)
    assert done.returncode == 2
    expected = f"dpwise: error: --verify: the original dp_layers.py {FAILED[kind]}"
    assert done.stderr.strip().splitlines() == [expected]
    assert done.stdout == "" and not out.exists()


def test_the_harness_line_is_found_when_two_workers_wrote_it_at_once():
    said = "it ended without an optimizer step (no optimizer.step() was reached)"
    stderr = f"W1130 some warning\ndpwise-verify: {said}dpwise-verify: {said}\nE1130 failed\n"
    assert cause(stderr, 4) == f"did not reach 4 steps under torchrun: {said}"


def test_a_rank_that_ends_early_leaves_its_reason_in_a_file(tmp_path):
    """torchrun stops the other workers when the first one ends: a rank that ends early writes
    why to its own file first, so the reason is not lost with a worker stopped mid-print."""
    import subprocess
    import sys

    from conftest import child_env
    from dpwise.userscript.harness import ENDED

    script = tmp_path / "idle.py"
    script.write_text("import torch\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)])\n")
    env = child_env(
        {"RANK": "1", "DPWISE_SCRIPT_STEPS": "2", "DPWISE_SCRIPT_OUT": str(tmp_path / "p.pt")}
    )
    done = subprocess.run(
        [sys.executable, "-m", "dpwise.userscript.harness", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3
    assert "without an optimizer step" in (tmp_path / f"{ENDED}1").read_text()
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.slow
def test_a_run_that_hangs_is_stopped_at_the_timeout_with_its_workers(tmp_path):
    import os
    from multiprocessing import forkserver, resource_tracker

    from conftest import descendants
    from dpwise.errors import DpwiseError
    from dpwise.migrate.verify import verify

    script = tmp_path / "hangs.py"
    script.write_text("import time\ntime.sleep(3600)  # a worker that never reaches a step\n")
    before = descendants(os.getpid())
    with pytest.raises(DpwiseError, match="did not end within 10 s"):
        verify(script, script.read_text(), steps=1, timeout=10)
    servers = {forkserver._forkserver._forkserver_pid, resource_tracker._resource_tracker._pid}
    assert descendants(os.getpid()) - before - servers == set(), "workers left running"


def test_a_dead_weak_proxy_among_the_objects_is_no_model() -> None:
    """The garbage collector lists weak proxies whose object is gone (left by earlier code in
    the process); asking their class raises ReferenceError, which must not stop the search."""
    import weakref

    class Gone:
        pass

    gone = Gone()
    kept = [weakref.proxy(gone)]  # a proxy that outlives its object, as a library's may
    del gone
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert owning_models(optimizer) == [model]
    assert kept  # the dead proxy stayed listed while the models were searched

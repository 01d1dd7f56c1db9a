"""What a command validates it hands down: nothing is resolved, loaded or built twice."""

import pytest
import torch

from dpwise.cli import main
from dpwise.compare import matrix
from dpwise.errors import DpwiseError
from dpwise.train import checkpoint
from dpwise.workload import spec as workload_module
from helpers_train import train_here

TINY = {"model": "userpkg:tiny_model", "data": "userpkg:tiny_data", "batch_size": 8}
TINY_ARGS = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]


def _count(monkeypatch, owner, name):
    """Calls of ``owner.name`` from now on (args, kwargs), still doing the real work."""
    calls, real = [], getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_train_resolves_and_inspects_the_workload_once(tmp_path, userpkg, monkeypatch):
    resolved = _count(monkeypatch, workload_module, "resolve_workload")
    inspected = _count(monkeypatch, workload_module.Workload, "build_for_inspection")
    args = ["--model", "userpkg:tiny_model", "--batch-size", "8", "--max-steps", "2"]
    assert main(["train", "--quiet", *args, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "final.pt").is_file()
    assert len(resolved) == 1  # the command's, handed to the training in this process
    assert len(inspected) == 1  # the synthetic data inferred from the model, once


@pytest.fixture
def saved(tmp_path, userpkg):
    """A checkpoint of the tiny workload after 8 of its 16 steps, in tmp_path."""
    train_here(tmp_path, epochs=1, checkpoint_every=4, **TINY)
    return tmp_path / "checkpoint.pt"


def test_train_resume_loads_the_checkpoint_once(saved, monkeypatch):
    loads = _count(monkeypatch, checkpoint, "load")
    args = ["train", "--quiet", *TINY_ARGS, "--epochs", "2", "--out", str(saved.parent)]
    assert main([*args, "--resume"]) == 0
    assert [kw.get("header_only", False) for _, kw in loads] == [False]


def test_a_launching_train_reads_only_the_checkpoint_header(saved, monkeypatch):
    """The workers are other processes that load the checkpoint: the parent only checks it."""
    launched = []
    monkeypatch.setattr(
        "dpwise.train.session.launch",
        lambda settings, entry, plan, **kw: launched.append(plan.config),
    )
    reads = _count(monkeypatch, torch, "load")
    args = ["train", "--quiet", *TINY_ARGS, "--strategy", "ddp", "--nproc", "2"]
    assert main([*args, "--epochs", "2", "--out", str(saved.parent), "--resume"]) == 0
    assert len(launched) == 1 and launched[0].resume == saved
    assert [kw.get("mmap") for _, kw in reads] == [True]


def _legacy(path):
    torch.save(torch.load(path, weights_only=True), path, _use_new_zipfile_serialization=False)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _settings(path):
    state = torch.load(path, weights_only=True)
    state["fingerprint"]["lr"] = 0.5
    torch.save(state, path)


@pytest.mark.parametrize(
    "damage",
    [_truncate, _settings, lambda p: p.write_bytes(b"not a checkpoint"), lambda p: p.unlink()],
)
def test_a_header_read_refuses_as_a_full_read_does(saved, damage):
    damage(saved)
    expected = checkpoint.fingerprint(_tiny())
    messages = []
    for header_only in (False, True):
        with pytest.raises(DpwiseError) as caught:
            checkpoint.load(saved, expected, header_only=header_only)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_a_header_read_of_a_legacy_file_reads_it_whole(saved):
    _legacy(saved)  # not a zip: it cannot be mapped
    expected = checkpoint.fingerprint(_tiny())
    mapped = checkpoint.load(saved, expected, header_only=True)
    assert mapped["position"] == checkpoint.load(saved, expected)["position"]


def _tiny():
    from dpwise.train.config import TrainConfig

    return TrainConfig(**TINY).to_dict()


def test_a_restart_reads_its_resume_checkpoint_once(saved, monkeypatch):
    """--resume's file is also the run's latest: one read serves both questions."""
    from dpwise.launch.env import DistEnv
    from dpwise.train.config import TrainConfig
    from dpwise.train.restart import attempt_for

    cfg = TrainConfig(out=saved.parent, epochs=2, checkpoint_every=4, resume=saved, **TINY)
    env = DistEnv(run_id="this-launch", restart_count=1, under_launcher=True)
    loads = _count(monkeypatch, checkpoint, "load")
    attempt = attempt_for(cfg, env)
    assert len(loads) == 1
    assert attempt.label == f"--resume {saved}"
    assert attempt.notice == "restart 1: resuming from step 8 of checkpoint.pt"


def test_compare_builds_its_matrix_and_resolves_its_workload_once(tmp_path, userpkg, monkeypatch):
    built = _count(monkeypatch, matrix, "device_type_for")  # every build_matrix asks it first
    resolved = _count(monkeypatch, workload_module, "resolve_workload")
    args = ["--strategies", "single", "--epochs", "2", "--repeats", "1", "--max-steps", "2"]
    code = main(["compare", "--quiet", *TINY_ARGS, *args, "--out", str(tmp_path / "c")])
    assert code in (0, 1) and (tmp_path / "c" / "results.json").is_file()
    assert len(built) == 1 and len(resolved) == 1


def _meta_builds(monkeypatch):
    """Every build of the workload's model, by the device it was built on."""
    devices, real = [], workload_module.Workload.build_model

    def counted(self):
        devices.append(torch.get_default_device().type)
        return real(self)

    monkeypatch.setattr(workload_module.Workload, "build_model", counted)
    return devices


def test_train_builds_the_meta_model_once_for_every_check(saved, monkeypatch):
    """The strategy, the optimizer and --resume's checkpoint are checked on one meta-device
    model (dpwise.train.inspection), and the run builds its own once."""
    from dpwise.train import inspection

    builders = _count(monkeypatch, inspection, "meta_model")
    built = _meta_builds(monkeypatch)
    args = ["train", "--quiet", *TINY_ARGS, "--epochs", "2", "--out", str(saved.parent)]
    assert main([*args, "--resume"]) == 0
    assert len(builders) == 1
    assert sorted(built) == ["cpu", "meta"]  # the checks' model, then the run's


def test_train_dry_run_builds_no_model(tmp_path, userpkg, monkeypatch):
    built = _meta_builds(monkeypatch)
    assert main(["train", *TINY_ARGS, "--strategy", "ddp", "--nproc", "2", "--dry-run"]) == 0
    assert built == []


def test_compare_checks_and_analysis_share_one_model_and_one_probe(tmp_path, userpkg, monkeypatch):
    """compare's checks of every strategy and its analysis read one meta-device model and one
    probe: the command's Inspection, made once."""
    import dpwise.diagnosis
    from dpwise.compare.matrix import build_matrix
    from dpwise.compare.session import check_runs
    from dpwise.compare.settings import CompareConfig
    from dpwise.infra.hardware import Hardware
    from dpwise.train import inspection
    from dpwise.workload.spec import workload_for

    builders = _count(monkeypatch, inspection, "meta_model")
    probes = _count(monkeypatch, dpwise.diagnosis, "probe_workload")
    cfg = CompareConfig(**TINY, out=tmp_path)
    seen = inspection.Inspection(workload_for(cfg).validate(), cfg.seed)
    check_runs(build_matrix(cfg, Hardware.detect()), seen, cfg.optimizer)
    assert seen.structure is seen.meta  # what the analysis reads (compare.analysis.assemble)
    assert seen.probe.skipped is None
    assert (len(builders), len(probes)) == (1, 1)

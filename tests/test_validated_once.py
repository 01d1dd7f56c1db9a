"""What a command validates it hands down: nothing is resolved, loaded or built twice."""

import pytest
import torch

from dpwise import checkpoint
from dpwise.errors import DpwiseError
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


@pytest.fixture
def saved(tmp_path, userpkg):
    """A checkpoint of the tiny workload after 8 of its 16 steps, in tmp_path."""
    train_here(tmp_path, epochs=1, checkpoint_every=4, **TINY)
    return tmp_path / "checkpoint.pt"


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
    from dpwise.config import TrainConfig

    return TrainConfig(**TINY).to_dict()

import pytest
import torch

from dpwise.advise.facts import gather
from dpwise.errors import DpwiseError
from dpwise.infra import env_report, hardware
from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.train.batch_split import check_batch_divides


@pytest.fixture
def threads(monkeypatch):
    """Eight cores, no OMP_NUM_THREADS; PyTorch's thread count restored afterwards."""
    before = torch.get_num_threads()
    monkeypatch.setattr(hardware, "cpu_cores", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(3)
    yield
    torch.set_num_threads(before)


def test_threads_given_are_set(threads):
    assert configure_threads(2, workers_per_node=4) == 2 == torch.get_num_threads()


def test_workers_sharing_a_node_split_its_cores(threads):
    assert configure_threads(None, workers_per_node=4) == 2


def test_one_worker_keeps_pytorchs_threads(threads):
    assert configure_threads(None, workers_per_node=1) == 3


def test_omp_num_threads_wins_over_the_split(threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert configure_threads(None, workers_per_node=4) == 3


def test_every_report_reads_the_same_probe(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_cores", lambda: 7)
    monkeypatch.setattr(hardware, "cuda_devices", lambda: 0)
    monkeypatch.setattr(hardware, "backend_available", lambda name: name == "nccl")
    facts = gather(None, None, None, None, None, None, None)
    assert facts["cpu_cores"].value == 7 and facts["gpus"].value == 0
    assert facts["nccl_available"].value and not facts["gloo_available"].value
    report = env_report.gather()
    assert report["cpu_cores"] == 7 and report["gpus"] == []
    assert report["nccl_available"] and not report["gloo_available"]
    assert Hardware.detect() == Hardware(cuda_devices=0, cpu_cores=7)


def test_batch_check_names_one_size_or_every_size():
    check_batch_divides(12, (1, 2, 3))
    with pytest.raises(DpwiseError) as one:
        check_batch_divides(250, (4,))
    assert str(one.value) == (
        "--batch-size 250 is not divisible by world size 4; use a multiple of 4 (e.g. 248 or 252)"
    )
    with pytest.raises(DpwiseError) as every:
        check_batch_divides(4, (2, 3), name_sizes=True)
    assert str(every.value) == (
        "--batch-size 4 is not divisible by world size 3; use a multiple of 6 so every world "
        "size in [2, 3] divides it (e.g. 6)"
    )

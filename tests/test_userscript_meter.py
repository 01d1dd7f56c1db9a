"""The meter a user's script runs under (measure.meter), in this process: the rows that enter
the model per optimizer step, and their digests, without editing the code that trains."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

from dpwise.measure.meter import DIGEST_VALUES, MASK, Meter, first_tensor, rowset, sample_bytes


class Tagger(nn.Module):
    """A model called with keywords, as a transformers model is."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.embed(input_ids)).mean()


@pytest.fixture
def meter():
    m = Meter().install()
    yield m
    m.remove()
    assert not torch_module._global_forward_hooks and not torch_module._global_forward_pre_hooks


def train(model, batches, meter, micro=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, x in enumerate(batches):
        model(x).sum().backward()
        if (i + 1) % micro == 0:
            opt.step()
            meter.step()
            opt.zero_grad()


def test_each_step_counts_the_rows_of_its_micro_batches_once(meter):
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 1))
    batches = [torch.randn(8, 3) for _ in range(6)]
    train(model, batches, meter, micro=2)  # the submodules' calls are not rows
    assert meter.record.rows == [16, 16, 16]
    assert len(meter.record.ends) == 3 and meter.record.ends == sorted(meter.record.ends)
    assert len(set(meter.record.digests)) == 3 and all(meter.record.digests)


def test_the_same_rows_give_the_same_digests_and_other_rows_others():
    model = nn.Linear(3, 1)
    data = [torch.randn(4, 3) for _ in range(3)]
    seen = []
    for batches in (data, data, [x + 1 for x in data]):
        m = Meter().install()
        try:
            train(model, batches, m)
        finally:
            m.remove()
        seen.append(m.record.digests)
    assert seen[0] == seen[1] and not set(seen[0]) & set(seen[2])


def test_a_model_called_with_keywords_counts_its_first_tensor(meter):
    model = Tagger()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        model(input_ids=torch.randint(0, 10, (5, 7)), labels=None).backward()
        opt.step()
        meter.step()
    assert meter.record.rows == [5, 5]


def test_dataparallel_counts_the_whole_batch_not_each_replicas_share(meter):
    model = nn.DataParallel(nn.Linear(3, 1))  # on the CPU it runs the module itself
    train(model, [torch.randn(12, 3) for _ in range(2)], meter)
    assert meter.record.rows == [12, 12]


def test_after_the_first_step_only_the_outermost_modules_are_hooked(meter):
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    train(model, [torch.randn(2, 3)], meter)
    assert not torch_module._global_forward_hooks  # narrowed to the model's own hook
    assert len(model._forward_hooks) == 1 and not model[0]._forward_hooks
    train(model, [torch.randn(2, 3)], meter)
    assert meter.record.rows == [2, 2]


def test_a_step_without_a_model_call_has_no_rows(meter):
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.step()
    meter.step()
    assert meter.record.rows == [0] and meter.record.digests == [""]


def test_a_digest_reads_a_bounded_sample_of_any_batch():
    assert first_tensor([1, {"x": torch.ones(2)}]) is not None
    assert first_tensor(["text", 3]) is None
    big = torch.arange(10_000.0).reshape(100, 100)
    assert len(sample_bytes(big)) <= len(repr((100, 100))) + 8 * DIGEST_VALUES
    assert sample_bytes(big) != sample_bytes(big + 1)


def test_a_loss_module_called_at_the_top_is_not_a_model(meter):
    """The guide's `criterion(out, y)`: a module without parameters, called outside the model."""
    model, criterion = nn.Linear(3, 2), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        criterion(model(torch.randn(6, 3)), torch.tensor([0, 1] * 3)).backward()
        opt.step()
        meter.step()
    assert meter.record.rows == [6, 6]


def test_a_row_set_is_the_sum_of_its_parts_in_any_order_and_other_rows_differ():
    """What a step's global batch is, however it was split: two ranks' halves add up to one
    process's whole batch, in any order; one row changed or left out changes it."""
    x = torch.randint(0, 50, (64, 8))
    whole = rowset(x)
    assert (rowset(x[::2]) + rowset(x[1::2])) & MASK == whole == rowset(x[torch.randperm(64)])
    other = x.clone()
    other[5, 7] += 1  # a value a row's hash does not read would go unseen: 8 < ROW_VALUES
    assert rowset(other) != whole and rowset(x[1:]) != whole and rowset(x[:0]) == 0


def test_the_meter_adds_each_step_s_row_sets(meter):
    model = nn.Linear(3, 1)
    batches = [torch.randn(4, 3) for _ in range(4)]
    train(model, batches, meter, micro=2)
    assert meter.record.rowsets == [
        (rowset(batches[0]) + rowset(batches[1])) & MASK,
        (rowset(batches[2]) + rowset(batches[3])) & MASK,
    ]

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from dpwise.workload.data import BatchSource, epoch_permutation, micro_batch_rows


def test_rows_match_distributed_sampler_for_every_rank_and_epoch():
    n, world, per_rank, seed = 40, 2, 4, 7
    dataset = TensorDataset(torch.arange(n))
    for epoch in range(2):
        perm = epoch_permutation(n, seed, epoch)
        for rank in range(world):
            sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed)
            sampler.set_epoch(epoch)
            loader = DataLoader(dataset, batch_size=per_rank, sampler=sampler)
            for step, (batch,) in enumerate(loader):
                ours = micro_batch_rows(perm, step, 0, per_rank * world, 1)[rank::world]
                assert torch.equal(batch, ours), (epoch, rank, step)


def test_accumulation_cuts_one_larger_batch_into_contiguous_blocks():
    perm = torch.arange(100)
    big = micro_batch_rows(perm, 1, 0, 40, 1)
    parts = [micro_batch_rows(perm, 2, j, 20, 2) for j in range(2)]
    assert torch.equal(torch.cat(parts), perm[80:120])
    assert torch.equal(big, perm[40:80])


def test_tensor_and_dataset_sources_give_the_same_batch(userpkg):
    import userpkg as up

    rows = torch.tensor([5, 1, 9])
    x1, y1 = BatchSource(up.tiny_data(3), "t").get(rows)
    x2, y2 = BatchSource(up.pair_dataset(3), "t").get(rows)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)

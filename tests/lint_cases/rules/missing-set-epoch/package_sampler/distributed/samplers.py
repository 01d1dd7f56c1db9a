from torch.utils.data.distributed import DistributedSampler


def get_sampler(dataset):
    return DistributedSampler(dataset, shuffle=True)

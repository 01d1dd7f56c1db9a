from torch import nn
from torch.nn.parallel import DataParallel as DP
from torch.nn.parallel import data_parallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)


def build(devices):
    return DP(Net().cuda(devices[0]), device_ids=devices)  # expect: data-parallel-usage


def forward_all(net, x, devices):
    return data_parallel(net, x, device_ids=devices)  # expect: data-parallel-usage


model = nn.parallel.DataParallel(Net())  # expect: data-parallel-usage

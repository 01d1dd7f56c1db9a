# common.py: the guide's common.py (tests/userscripts/guide/common.py) with less data, so that a
# test trains in a moment; the scripts beside it import it as the guide's import theirs
import torch, torch.nn as nn

class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

def get_dataloader(batch_size):
    # Dummy dataset: 1k samples
    data = torch.randn(1024, 64)
    target = torch.randint(0, 10, (1024,))
    dataset = torch.utils.data.TensorDataset(data, target)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)

import torch, torch.nn as nn

class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1000, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

def get_dataloader(batch_size):
    # Dummy dataset: 10k samples
    data = torch.randn(10000, 1000)
    target = torch.randint(0, 10, (10000,))
    dataset = torch.utils.data.TensorDataset(data, target)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)

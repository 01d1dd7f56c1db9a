"""Train from a JSON config file: every setting lives in config_file.json beside this script.

Style: the script takes an optional config path (first argument, default: the JSON file next to the
script), builds the model, optimizer and loader from the dict, and wraps the model in
nn.DataParallel.

Run:     python config_file.py [path/to/config.json]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import json
import os
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def load_config(path):
    with open(path) as f:
        return json.load(f)


def build_model(cfg):
    layers, width = [], cfg["in_features"]
    for hidden in cfg["hidden"]:
        layers += [nn.Linear(width, hidden), nn.Tanh()]
        width = hidden
    layers.append(nn.Linear(width, cfg["classes"]))
    return nn.Sequential(*layers)


def build_optimizer(cfg, params):
    if cfg["name"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    return torch.optim.SGD(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])


config_path = sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("config_file.json")
config = load_config(config_path)
torch.manual_seed(config["seed"])

n, m = config["data"]["samples"], config["model"]
features = torch.randn(n, m["in_features"])
targets = torch.randint(0, m["classes"], (n,))
loader = DataLoader(TensorDataset(features, targets), batch_size=config["batch_size"], shuffle=True)

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.DataParallel(build_model(m)).to(device)
optimizer = build_optimizer(config["optimizer"], model.parameters())
loss_fn = nn.CrossEntropyLoss()

for epoch in range(config["epochs"]):
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: mean loss {total / len(loader):.4f}")

torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))

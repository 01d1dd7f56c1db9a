"""The transformers Trainer on a tiny GPT-2 built from its config (nothing downloaded), rows made
in the script; the same file under `python` (one process) and under torchrun (DDP, the Trainer's
own distributed sampler). The global batch is --per-device-batch × the processes."""

import argparse
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--per-device-batch", type=int, default=16)
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()


class Rows(torch.utils.data.Dataset):
    def __init__(self, n=128, length=8, vocab=64):
        g = torch.Generator().manual_seed(11)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
training = TrainingArguments(
    output_dir=tempfile.mkdtemp(prefix="hf-trainer-"),
    per_device_train_batch_size=args.per_device_batch,
    max_steps=args.steps,
    learning_rate=1e-3,
    warmup_steps=2,
    lr_scheduler_type="linear",
    max_grad_norm=1.0,
    weight_decay=0.01,
    seed=0,
    report_to="none",
    save_strategy="no",
    logging_strategy="no",
    disable_tqdm=True,
    dataloader_num_workers=0,
    use_cpu=not torch.cuda.is_available(),  # else on a CPU torchrun's ranks do not train together
)
trainer = Trainer(model=GPT2LMHeadModel(config), args=training, train_dataset=Rows())
trainer.train()

"""Train a tiny Llama for a few steps on CPU and dump every other step with the exporter's hook.

Writes examples/dumps/checkpoints/*.json.gz: a real training run whose weights move, for
`mrep history` and `mrep diff` (and their tests). Usage: .venv/bin/python examples/train_checkpoints.py
"""

import os
import sys

import torch

from mrep_export import CheckpointDumper
from mrep_export.hf import build_hf_model, load_hf_config

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.environ.get("MREP_CONFIGS", os.path.join(HERE, "configs"))  # shipped with the repository


def main(out_dir: str = os.path.join(HERE, "dumps", "checkpoints"), steps: int = 7, every: int = 2) -> None:
    overrides = ["num_hidden_layers=2", "hidden_size=64", "intermediate_size=160", "num_attention_heads=4",
                 "num_key_value_heads=2", "head_dim=16", "vocab_size=256"]
    config = load_hf_config(os.path.join(CONFIGS, "Llama-3.1-8B.json"), overrides)
    torch.manual_seed(0)
    model = build_hf_model(config, device="cpu", dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.randint(0, 256, (32, 33), generator=torch.Generator().manual_seed(1))
    dumper = CheckpointDumper(model, out_dir, name="tiny-llama", label="adamw-3e-3", every=every, tags=["example"])
    model.train()
    for step in range(steps):
        batch = data[(step * 4) % 32:(step * 4) % 32 + 4]
        loss = model(input_ids=batch[:, :-1], labels=batch[:, 1:]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if dumper.maybe_dump(step):
            print(f"step {step}: loss {loss.item():.4f} -> {dumper.written[-1].path}")


if __name__ == "__main__":
    main(*sys.argv[1:2])

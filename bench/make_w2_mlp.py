#!/usr/bin/env python3
"""Builds W2's model for bench/lineage_bench.sh: a TorchScript package holding
an MLP of three Linear(1024, 1024) layers (fp32, seeded weights) that takes a
row's 1024 hash-derived inputs as input_ids and returns two outputs.

  /usr/bin/python3 bench/make_w2_mlp.py OUT_DIR
"""
import hashlib
import json
import os
import sys

import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(1024, 1024)
        self.l2 = torch.nn.Linear(1024, 1024)
        self.l3 = torch.nn.Linear(1024, 1024)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = input_ids.to(torch.float32) / 32768.0 - 1.0
        x = x * attention_mask.to(torch.float32)
        x = torch.relu(self.l1(x))
        x = torch.relu(self.l2(x))
        return self.l3(x)[:, :2]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    module = torch.jit.script(Mlp().eval())
    path = os.path.join(out, "model.ts.pt")
    module.save(path)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    description = {
        "task": "sequence_classification",
        "inputs": ["input_ids", "attention_mask"],
        "max_length": 1024,
        "pad_token_id": 0,
        "id2label": {"0": "first", "1": "second"},
        "function_to_apply": "none",
        "module": "model.ts.pt",
        "files": {"model.ts.pt": sha},
    }
    with open(os.path.join(out, "djshard_model.json"), "w") as f:
        json.dump(description, f, indent=2)


if __name__ == "__main__":
    main()

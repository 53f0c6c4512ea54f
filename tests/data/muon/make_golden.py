#!/usr/bin/env python3
"""make_golden.py — golden data for tapegrad's Muon (tests/test_optim_muon.cpp), made with torch.optim.Muon.

Run with a PyTorch that has torch.optim.Muon (2.9 or later, from PyPI):
    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy
    /tmp/tv/bin/python tests/data/muon/make_golden.py      # writes tests/data/muon/muon_golden.safetensors

Three weight matrices (tall [6, 4], wide [3, 5], square [4, 4]) start from seeded normal values; each of 3 steps
sets their .grad to a seeded normal matrix and calls torch.optim.Muon.step(). Saved per case: the parameters
after every step ("<case>.<param>.step<k>"), with the start ("param.<param>") and the gradients
("grad.<param>.step<k>") shared by all cases.

torch.optim.Muon computes its Newton-Schulz iteration in bfloat16 (`grad.to(dtype=torch.bfloat16, ...)`). For the
float64 cases the module's `torch` is replaced by a view of torch whose `bfloat16` is float64, so that torch's own
code runs unchanged in float64 (tapegrad's test then holds float64 to 1e-10). The case "bf16" runs torch as it
ships (float32 parameters, bf16 iteration), for a loose check of tapegrad's bf16 iteration.
"""
import json
import struct
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torch.optim._muon as muon_module

OUT = Path(__file__).resolve().parent / "muon_golden.safetensors"
SHAPES = {"tall": (6, 4), "wide": (3, 5), "square": (4, 4)}
STEPS = 3

# name → (Muon kwargs, parameter groups: list of (param names, group overrides), dtype, bf16 iteration?)
CASES = {
    "default": (dict(lr=0.02), [(["tall", "wide", "square"], {})], torch.float64, False),
    "plain_rms": (dict(lr=0.01, weight_decay=0.0, momentum=0.9, nesterov=False, adjust_lr_fn="match_rms_adamw",
                       ns_steps=3), [(["tall", "wide", "square"], {})], torch.float64, False),
    "groups_spectral": (dict(lr=0.05, weight_decay=0.2, adjust_lr_fn="spectral_unclamped"),
                        [(["tall"], {}), (["wide", "square"], dict(lr=0.01, weight_decay=0.0))], torch.float64, False),
    "bf16": (dict(lr=0.02), [(["tall", "wide", "square"], {})], torch.float32, True),
}


class Float64ForBfloat16(types.ModuleType):
    """torch, except that torch.bfloat16 is torch.float64 (for the float64 cases)."""

    def __getattr__(self, name):
        return torch.float64 if name == "bfloat16" else getattr(torch, name)


def main():
    if not hasattr(torch.optim, "Muon"):
        sys.exit(f"make_golden.py: torch {torch.__version__} has no torch.optim.Muon (2.9 or later has it)")
    gen = torch.Generator().manual_seed(20261204)
    start = {n: torch.randn(s, generator=gen, dtype=torch.float64) for n, s in SHAPES.items()}
    grads = {(n, k): torch.randn(s, generator=gen, dtype=torch.float64) for k in range(1, STEPS + 1)
             for n, s in SHAPES.items()}
    tensors = {f"param.{n}": t for n, t in start.items()}
    tensors.update({f"grad.{n}.step{k}": g for (n, k), g in grads.items()})
    real_torch = muon_module.torch
    for case, (kwargs, groups, dtype, bf16) in CASES.items():
        params = {n: start[n].to(dtype).clone().requires_grad_() for n in SHAPES}
        opt = torch.optim.Muon([dict(params=[params[n] for n in names], **extra) for names, extra in groups], **kwargs)
        muon_module.torch = real_torch if bf16 else Float64ForBfloat16("torch")
        try:
            for k in range(1, STEPS + 1):
                for n, p in params.items():
                    p.grad = grads[(n, k)].to(dtype)
                opt.step()
                for n, p in params.items():
                    tensors[f"{case}.{n}.step{k}"] = p.detach().to(torch.float64).clone()
        finally:
            muon_module.torch = real_torch
    write_safetensors(OUT, tensors, {"made_by": f"torch {torch.__version__} torch.optim.Muon",
                                     "script": "tests/data/muon/make_golden.py"})
    print(f"wrote {OUT} ({len(tensors)} tensors, torch {torch.__version__})")


def write_safetensors(path, tensors, metadata):
    """The safetensors format: an 8-byte little-endian header length, a JSON header, the raw data (F64, C order)."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name].numpy(), dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_golden_lm.py — makes the float64 golden files of a small Transformer LM with PyTorch.

The files are ../shared/data/reference/lm_mha_seed0.safetensors and lm_gqa_seed1.safetensors (see
../shared/data/README.md, "reference/"): a model's weights, inputs, hidden states, logits, loss, every
parameter's gradient and the parameters after one AdamW step, all computed in float64. Chapter 6 of
docs/learn (`06_transformer_block --golden`) and tests/test_nn_reference.cpp, tests/test_optim_adamw.cpp
compare tapegrad with them. A clone without ../shared can make its own:

    scripts/deps.sh --bench                             # Debian's python3-torch (or: pip install torch)
    python3 scripts/make_golden_lm.py                   # writes ../shared/data/reference/*.safetensors
    python3 scripts/make_golden_lm.py --out DIR         # somewhere else
    python3 scripts/make_golden_lm.py --check FILE...   # recompute a file from its weights and inputs

The weights are random but seeded, drawn in the order CI's files were: with the same seeds this script
makes the same weights and inputs (checked: equal to the bit), and everything computed from them agrees
with CI's files to about 1e-15 (checked with PyTorch 2.15; another version or CPU may change the last
bits). --check loads a file's weights and inputs, recomputes everything else and prints the largest
difference for each kind of tensor: it shows that this script computes what the file holds.

The model follows CS336 assignment 1: token embedding; per layer x + attn(ln1(x)), then x + ffn(ln2(x));
ln_final; untied lm_head. RMSNorm x / sqrt(mean(x²) + eps) · g with eps 1e-5; RoPE on interleaved pairs
(2k, 2k+1) by pos · theta^(-2k/D), positions 0..T-1; causal softmax(QKᵀ/√D)V, grouped-query attention
when kv_heads < heads (query head h reads kv head h // (heads / kv_heads)); SwiGLU w2(silu(w1 x) ⊙ w3 x);
Linear weights [out, in], no biases. The safetensors file is written by hand (JSON header + raw
little-endian bytes), so PyTorch is the only package needed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys

try:
    import torch
except ImportError:
    print("error: make_golden_lm.py needs PyTorch (scripts/deps.sh --bench, or pip install torch)", file=sys.stderr)
    sys.exit(2)

ADAMW = dict(lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
ADAMW_TEXT = "lr=0.01 betas=(0.9,0.95) eps=1e-8 weight_decay=0.1"
CONFIGS = {
    "lm_mha_seed0.safetensors": dict(vocab=512, d_model=64, layers=2, heads=4, kv_heads=4, d_ff=172, theta=10000.0,
                                     batch=3, seq=24, eps=1e-5, seed=0),
    "lm_gqa_seed1.safetensors": dict(vocab=300, d_model=64, layers=3, heads=8, kv_heads=2, d_ff=128, theta=10000.0,
                                     batch=2, seq=17, eps=1e-5, seed=1),
}
DTYPES = {torch.float64: "F64", torch.int64: "I64"}


def param_shapes(c: dict) -> list[tuple[str, list[int]]]:
    """Every parameter's name and shape, in the order the weights are drawn (the files' order)."""
    C, D = c["d_model"], c["d_model"] // c["heads"]
    out = [("token_embeddings.weight", [c["vocab"], C]), ("ln_final.weight", [C]), ("lm_head.weight", [c["vocab"], C])]
    for i in range(c["layers"]):
        p = f"layers.{i}."
        out += [(p + "attn.q_proj.weight", [c["heads"] * D, C]),
                (p + "attn.k_proj.weight", [c["kv_heads"] * D, C]),
                (p + "attn.v_proj.weight", [c["kv_heads"] * D, C]),
                (p + "attn.output_proj.weight", [C, c["heads"] * D]),
                (p + "ln1.weight", [C]), (p + "ln2.weight", [C]), (p + "ffn.w1.weight", [c["d_ff"], C]),
                (p + "ffn.w3.weight", [c["d_ff"], C]), (p + "ffn.w2.weight", [C, c["d_ff"]])]
    return out


def random_model(c: dict) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Seeded weights (matrices N(0, 1/fan_in), gains 1 + N(0, 0.1²), float64 draws from torch.manual_seed(seed)),
    then token ids and targets: the draws that made CI's files."""
    torch.manual_seed(c["seed"])
    weights = {}
    for name, shape in param_shapes(c):
        if len(shape) == 1:
            weights[name] = 1 + 0.1 * torch.randn(shape, dtype=torch.float64)
        else:
            weights[name] = torch.randn(shape, dtype=torch.float64) * (1 / math.sqrt(shape[1]))
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]))
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq"]))
    return weights, ids, targets


def rms_norm(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x [B, H, T, D]: rotate each interleaved pair (2k, 2k+1) at position t by t · theta^(-2k/D)."""
    T, D = x.shape[-2], x.shape[-1]
    angle = torch.arange(T, dtype=x.dtype)[:, None] * theta ** (-torch.arange(0, D, 2, dtype=x.dtype) / D)
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def forward(c: dict, w: dict[str, torch.Tensor], ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The logits [B, T, V] and the residual stream after each block."""
    B, T = ids.shape
    H, Hkv, C = c["heads"], c["kv_heads"], c["d_model"]
    D = C // H
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    x = w["token_embeddings.weight"][ids]
    hidden = []
    for i in range(c["layers"]):
        p = f"layers.{i}."
        h = rms_norm(x, w[p + "ln1.weight"], c["eps"])
        q = (h @ w[p + "attn.q_proj.weight"].T).view(B, T, H, D).transpose(1, 2)
        k = (h @ w[p + "attn.k_proj.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        v = (h @ w[p + "attn.v_proj.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        q, k = rope(q, c["theta"]), rope(k, c["theta"])
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        att = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + att.transpose(1, 2).reshape(B, T, C) @ w[p + "attn.output_proj.weight"].T
        h = rms_norm(x, w[p + "ln2.weight"], c["eps"])
        a, b = h @ w[p + "ffn.w1.weight"].T, h @ w[p + "ffn.w3.weight"].T
        x = x + (torch.nn.functional.silu(a) * b) @ w[p + "ffn.w2.weight"].T
        hidden.append(x)
    x = rms_norm(x, w["ln_final.weight"], c["eps"])
    return x @ w["lm_head.weight"].T, hidden


def compute(c: dict, weights: dict[str, torch.Tensor], ids: torch.Tensor,
            targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Everything a golden file holds, from the config, the weights and the inputs."""
    w = {k: v.detach().clone().requires_grad_() for k, v in weights.items()}
    logits, hidden = forward(c, w, ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab"]), targets.reshape(-1))
    loss.backward()
    out = {f"weights.{k}": v.detach().clone() for k, v in weights.items()}
    out["inputs.token_ids"], out["inputs.targets"] = ids, targets
    out.update({f"hidden.layers.{i}": h.detach() for i, h in enumerate(hidden)})
    out["expected.logits"], out["expected.loss"] = logits.detach(), loss.detach().reshape(1)
    out.update({f"grads.{k}": v.grad.clone() for k, v in w.items()})
    opt = torch.optim.AdamW(list(w.values()), **ADAMW)
    opt.step()
    out.update({f"adamw_step1.{k}": v.detach().clone() for k, v in w.items()})
    return out


def metadata(c: dict) -> dict[str, str]:
    meta = {k: str(v) for k, v in c.items()}
    meta.update(adamw=ADAMW_TEXT, loss="mean cross-entropy over B*T", dtype="float64")
    return meta


def save(path: str, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> None:
    header: dict = {"__metadata__": meta}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = bytes(t.reshape(-1).view(torch.uint8).tolist())   # little-endian, as on x86 and ARM
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load(path: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds = {"F64": torch.float64, "I64": torch.int64}
    out = {}
    for name, d in header.items():
        start, end = d["data_offsets"]
        buf = bytearray(raw[8 + n + start:8 + n + end])
        out[name] = torch.frombuffer(buf, dtype=kinds[d["dtype"]]).reshape(d["shape"]).clone()
    return out, meta


def config_of(meta: dict[str, str]) -> dict:
    ints = ("vocab", "d_model", "layers", "heads", "kv_heads", "d_ff", "batch", "seq", "seed")
    return {k: (int(meta[k]) if k in ints else float(meta[k])) for k in ints + ("theta", "eps")}


def check(path: str) -> bool:
    """Recompute path's tensors from its weights and inputs; True when every kind agrees to 1e-10 relative."""
    stored, meta = load(path)
    c = config_of(meta)
    weights = {k[len("weights."):]: v for k, v in stored.items() if k.startswith("weights.")}
    ours = compute(c, weights, stored["inputs.token_ids"], stored["inputs.targets"])
    worst: dict[str, float] = {}
    for name, theirs in stored.items():
        if name not in ours:
            print(f"{path}: {name} is in the file but not made by this script")
            return False
        scale = max(theirs.abs().max().item(), 1e-300)
        e = (ours[name].to(theirs.dtype) - theirs).abs().max().item() / scale
        kind = name.split(".")[0]
        worst[kind] = max(worst.get(kind, 0.0), e)
    ok = set(ours) == set(stored) and all(e <= 1e-10 for e in worst.values())
    print(f"{os.path.basename(path)}: " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())) +
          f" (max |ours - file| / max |file|): {'MATCH' if ok else 'MISMATCH'}")
    return ok


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="Make (or check) the float64 golden LM files with PyTorch.")
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "shared", "data", "reference"),
                    help="the folder to write into (default: ../shared/data/reference beside the clone)")
    ap.add_argument("--check", nargs="+", metavar="FILE", help="recompute these files and compare instead")
    opt = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    if opt.check:
        for path in opt.check:
            if not os.path.isfile(path):
                print(f"error: --check {path}: no such file", file=sys.stderr)
                return 2
        return 0 if all([check(p) for p in opt.check]) else 1
    try:
        os.makedirs(opt.out, exist_ok=True)
    except OSError as e:
        print(f"error: --out {opt.out}: cannot create the folder ({e.strerror})", file=sys.stderr)
        return 2
    for name, c in CONFIGS.items():
        weights, ids, targets = random_model(c)
        path = os.path.join(opt.out, name)
        save(path, compute(c, weights, ids, targets), metadata(c))
        print(f"wrote {os.path.normpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

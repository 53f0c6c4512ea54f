#!/usr/bin/env python3
"""dist_scaling.py — the data-parallel scaling model of docs/distributed.md, printed as Markdown tables.

For each model: the gradient bytes per step (float32, one per parameter), and for each machine (its
measured or quoted compute time per step at a fixed per-rank batch) and link bandwidth, the scaling
efficiency at 2, 8 and 64 ranks:
  ring all-reduce   t_comm = 2 (N-1)/N x bytes / bandwidth
  no overlap        eff = t_compute / (t_compute + t_comm)
  overlap           backward (about 2/3 of a step's compute) hides the all-reduce of every bucket but the
                    last: exposed = max(0, t_comm - 2/3 t_compute) + t_comm(one 4 MiB bucket);
                    eff = t_compute / (t_compute + exposed)
Usage: scripts/dist_scaling.py [--cpu-gflops G]   (G: the model GFLOP/s one rank reached here, single thread)
"""
import argparse


def params(V, C, L, H, Hkv, F, tied=False):
    D = C // H
    per_layer = C * C * 2 + 2 * C * Hkv * D + 3 * C * F + 2 * C  # q, o; k, v; SwiGLU; two RMSNorm gains
    return V * C * (1 if tied else 2) + L * per_layer + C


def flops_per_token(V, T, C, L, H, Hkv, F):  # lm/throughput.cpp's formula
    D = C / H
    n_mm = L * (2 * C * C + 2 * C * Hkv * D + 3 * C * F) + C * V
    return 6.0 * n_mm + 12.0 * L * T * C


LINKS = [("PCIe 25 GB/s", 25e9), ("NVLink 400 GB/s", 400e9), ("100 GbE 12.5 GB/s", 12.5e9)]
RANKS = [2, 8, 64]
BUCKET = 4 << 20


def efficiency(t_c, nbytes, bw, n):
    ring = lambda b: 2 * (n - 1) / n * b / bw
    t_comm = ring(nbytes)
    plain = t_c / (t_c + t_comm)
    exposed = max(0.0, t_comm - 2 / 3 * t_c) + ring(min(BUCKET, nbytes))
    return plain, t_c / (t_c + exposed), t_comm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu-gflops", type=float, default=None, help="model GFLOP/s of one rank here (1 thread)")
    a = ap.parse_args()
    models = {
        # name: (V, T, C, L, H, Hkv, F, per-rank batch)
        "tiny": (10000, 256, 512, 4, 16, 16, 1344, 8),
        "gpt2s": (50304, 1024, 768, 12, 12, 12, 2048, 16),
    }
    # H100 compute per step: PyTorch 2.11 eager fp32 tokens/s quoted in issue 11 (tapegrad's own GPU
    # numbers come with the CUDA issue): tiny B8 149.5k tok/s, gpt2s B16 48.6k tok/s.
    h100 = {"tiny": 149.5e3, "gpt2s": 48.6e3}
    for name, (V, T, C, L, H, Hkv, F, B) in models.items():
        p = params(V, C, L, H, Hkv, F)
        nbytes = 4 * p
        tokens = B * T
        machines = [("H100 (PyTorch eager fp32 rate)", tokens / h100[name])]
        if a.cpu_gflops:
            t = tokens * flops_per_token(V, T, C, L, H, Hkv, F) / (a.cpu_gflops * 1e9)
            machines.insert(0, (f"this CPU, 1 core/rank at {a.cpu_gflops:.0f} GFLOP/s", t))
        print(f"\n{name}: {p / 1e6:.2f} M parameters, {nbytes / 1e6:.1f} MB of float32 gradients per step; "
              f"per-rank batch {B} x {T} = {tokens} tokens\n")
        print("| machine | compute/step | link | " + " | ".join(f"{n} ranks: all-reduce, eff. plain / overlap"
                                                             for n in RANKS) + " |")
        print("|---|---|---|" + "---|" * len(RANKS))
        for mname, t_c in machines:
            for lname, bw in LINKS:
                cells = []
                for n in RANKS:
                    plain, over, t_comm = efficiency(t_c, nbytes, bw, n)
                    cells.append(f"{t_comm * 1e3:.1f} ms, {plain:.0%} / {over:.0%}")
                print(f"| {mname} | {t_c * 1e3:.1f} ms | {lname} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

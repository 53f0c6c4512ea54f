"""torch_attention.py -- the peer of bench_attention (bench/attention.cpp): PyTorch's
scaled_dot_product_attention(is_causal=True), forward and forward + backward, at the same shapes, dtype,
layout ([B, T, H, D] memory seen as [B, H, T, D]), FLOP convention and timing (median of --reps runs after
3 warm-ups, each ended by torch.cuda.synchronize()), once per SDPA backend (flash, cudnn, efficient).

  python3 bench/torch_attention.py [--shapes tiny,tinyB64,gpt2s] [--dtype bf16|fp32] [--reps 20]

Prints a table and one `RESULT {json}` line per (shape, backend); a backend that refuses a shape is
reported as such and skipped. The last lines name each shape's fastest backend (what issue 23's
"≥ 70 % of PyTorch SDPA's best backend" compares against).
"""
import argparse, json, math, statistics, time
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"tiny": (8, 16, 256, 32), "tinyB64": (64, 16, 256, 32), "gpt2s": (16, 12, 1024, 64)}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def timed(fn, reps):
    out = []
    for r in range(reps + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if r >= 3:
            out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="tiny,tinyB64,gpt2s")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print(f"{'shape':8} {'backend':10} {'B':>4} {'H':>3} {'T':>5} {'D':>4} {'fwd ms':>10} {'fwd+bwd ms':>10} "
          f"{'fwd TFLOP/s':>12} {'f+b TFLOP/s':>12}")
    best = {}
    for name in a.shapes.split(","):
        B, H, T, D = SHAPES[name]
        g = torch.Generator(device=dev).manual_seed(1)
        q, k, v = (torch.randn(B, T, H, D, device=dev, generator=g, dtype=dtype).transpose(1, 2).requires_grad_()
                   for _ in range(3))
        cot = torch.randn(B, H, T, D, device=dev, generator=g, dtype=dtype)
        flops_fwd = 4.0 * B * H * T * T * D / 2
        flops_both = 3.5 * flops_fwd
        for bname, backend in BACKENDS.items():
            try:
                with sdpa_kernel([backend]):
                    def fwd():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=True)

                    def both():
                        q.grad = k.grad = v.grad = None
                        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(cot)

                    mf, mb = timed(fwd, a.reps), timed(both, a.reps)
            except RuntimeError as e:
                print(f"{name:8} {bname:10} not available: {str(e).splitlines()[0][:100]}")
                continue
            tf, tb = flops_fwd / mf / 1e12, flops_both / mb / 1e12
            print(f"{name:8} {bname:10} {B:4} {H:3} {T:5} {D:4} {mf * 1e3:10.3f} {mb * 1e3:10.3f} {tf:12.2f} {tb:12.2f}")
            print("RESULT " + json.dumps({"impl": "pytorch", "backend": bname, "shape": name, "precision": a.dtype,
                                          "fwd_ms": round(mf * 1e3, 4), "fwd_bwd_ms": round(mb * 1e3, 4),
                                          "fwd_tflops": round(tf, 3), "fwd_bwd_tflops": round(tb, 3)}))
            if tb > best.get(name, ("", 0.0))[1]:
                best[name] = (bname, tb)
    for name, (bname, tb) in best.items():
        print(f"best SDPA backend for {name}: {bname}, fwd+bwd {tb:.2f} TFLOP/s (70 % of it: {0.7 * tb:.2f})")


if __name__ == "__main__":
    main()

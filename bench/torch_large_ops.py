#!/usr/bin/python3
"""torch_large_ops.py -- PyTorch twin of bench/large_ops.cpp (tapegrad's bench_large).

Same shapes, same medians (--reps timed runs after one untimed warm-up), per thread count:
  matmul n x n fp32 (n = 2048), A and B requires_grad, Y = A @ B, Y.backward(G) with an explicit
    gradient G: 3 GEMMs, GFLOP/s = 3*2*n^3 / time; plus the forward alone under no_grad and the
    backward alone (2 GEMMs).
  memory-bound ops on 16M floats (64 MiB per tensor) under no_grad: add, mul, exp, sum of all,
    sum over the last dim of [4096, 4096], max of all. GB/s = (bytes read + written) / time.
    As users write them (a fresh output per call: PyTorch's CPU allocator returns 64 MiB blocks
    to the OS, so every call also pays page faults), and for add/mul/exp also with out= into a
    preallocated tensor (the kernel alone). copy: dst.copy_(src), 2 x 64 MiB per call.
Prints a table per thread count and ends with one line `RESULT {json}` (parsed by bench/run.sh).

Usage: /usr/bin/python3 bench/torch_large_ops.py [--threads 1,2] [--reps 9] [--n 2048]
                                                 [--numel 16777216] [--only matmul|mem]
"""
import argparse
import ctypes
import json
import re
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", default="1,2")
ap.add_argument("--reps", type=int, default=9)
ap.add_argument("--n", type=int, default=2048)
ap.add_argument("--numel", type=int, default=16 << 20)
ap.add_argument("--only", choices=["matmul", "mem"], default=None)
args = ap.parse_args()
threads = [int(t) for t in args.threads.split(",") if t]
R, n, numel = args.reps, args.n, args.numel
assert numel % 4096 == 0


def blas_core():
    """The OpenBLAS core of the libblas.so.3 that torch loaded (Debian's torch uses the system BLAS)."""
    for lib in ("libblas.so.3", "libopenblas.so.0"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"


def blas_info():
    m = re.search(r"BLAS_INFO=[^,\s]*", torch.__config__.show())
    return m.group(0) if m else "BLAS_INFO=?"


def med(f, reps=R):
    f()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def openblas_set_threads(t):
    """torch.set_num_threads sets OpenMP's count; set OpenBLAS's too, as tapegrad does."""
    for lib in ("libblas.so.3", "libopenblas.so.0"):
        try:
            ctypes.CDLL(lib).openblas_set_num_threads(t)
            return
        except (OSError, AttributeError):
            continue


core = blas_core()
print(f"torch {torch.__version__} large ops | {blas_info()}, OpenBLAS core {core} | median of {R} reps after 1 warm-up")
res = {"lib": "torch", "version": torch.__version__, "blas_core": core, "n": n, "numel": numel, "reps": R, "threads": {}}
torch.manual_seed(0)
fbytes = numel * 4.0
rows = numel // 4096
if args.only != "matmul":
    x = torch.randn(numel)
    y = torch.rand(numel)
    x2 = x.view(rows, 4096)
for t in threads:
    torch.set_num_threads(t)
    openblas_set_threads(t)
    tr = {}
    if args.only != "mem":
        flop = 2.0 * n ** 3
        A = torch.randn(n, n, requires_grad=True)
        B = torch.randn(n, n, requires_grad=True)
        G = torch.randn(n, n)
        tf, tb, tt = [], [], []
        for rep in range(R + 1):  # rep 0: warm-up
            if rep == 1:
                c0, w0 = time.process_time(), time.perf_counter()
            A.grad = None
            B.grad = None
            t0 = time.perf_counter()
            Y = A @ B
            t1 = time.perf_counter()
            Y.backward(G)
            t2 = time.perf_counter()
            del Y
            if rep:
                tf.append(t1 - t0), tb.append(t2 - t1), tt.append(t2 - t0)
        cpw = (time.process_time() - c0) / (time.perf_counter() - w0)
        with torch.no_grad():
            tfwd = med(lambda: A @ B)
        tr.update(matmul_fwd_bwd_gflops=3 * flop / statistics.median(tt) / 1e9,
                  matmul_fwd_gflops=flop / tfwd / 1e9,
                  matmul_bwd_gflops=2 * flop / statistics.median(tb) / 1e9, matmul_cpu_per_wall=cpw)
        print(f"\n[threads {torch.get_num_threads()}] matmul {n} x {n} fp32")
        print(f"  {'matmul fwd+bwd (3 GEMMs)':<34}{tr['matmul_fwd_bwd_gflops']:>10.1f} GFLOP/s  "
              f"({statistics.median(tt) * 1e3:.1f} ms)")
        print(f"  {'  forward only (no grad)':<34}{tr['matmul_fwd_gflops']:>10.1f} GFLOP/s")
        print(f"  {'  backward only (2 GEMMs)':<34}{tr['matmul_bwd_gflops']:>10.1f} GFLOP/s")
        print(f"  effective threads (process CPU time / wall time, fwd+bwd): {cpw:.2f}")
        del A, B, G
    if args.only != "matmul":
        with torch.no_grad():
            dst = torch.empty(numel)
            dst.copy_(x)
            tc = med(lambda: dst.copy_(x))
            copy_gbs = 2 * fbytes / tc / 1e9
            out = torch.empty(numel)
            ops = [
                ("add", 3 * fbytes, lambda: x + y, lambda: torch.add(x, y, out=out)),
                ("mul", 3 * fbytes, lambda: x * y, lambda: torch.mul(x, y, out=out)),
                ("exp", 2 * fbytes, lambda: torch.exp(x), lambda: torch.exp(x, out=out)),
                ("sum_all", fbytes + 4, lambda: x.sum(), None),
                ("sum_lastdim", fbytes + 4.0 * rows, lambda: x2.sum(-1), None),
                ("max_all", fbytes + 4, lambda: x.max(), None),
            ]
            print(f"\n[threads {torch.get_num_threads()}] memory-bound ops on {numel} floats "
                  f"({fbytes / 2**20:.0f} MiB per tensor); sum_lastdim is [{rows}, 4096]")
            print(f"  {'op':<14}{'ms':>10}{'GB/s':>10}{'out= GB/s':>11}")
            print(f"  {'copy_':<14}{tc * 1e3:>10.2f}{copy_gbs:>10.2f}")
            tr["copy_gbs"] = copy_gbs
            tr["ops"] = {}
            for name, nbytes, f, f_out in ops:
                s = med(f)
                d = {"ms": s * 1e3, "gbs": nbytes / s / 1e9}
                if f_out is not None:
                    d["gbs_out"] = nbytes / med(f_out) / 1e9
                tr["ops"][name] = d
                extra = f"{d['gbs_out']:>11.2f}" if "gbs_out" in d else f"{'-':>11}"
                print(f"  {name:<14}{s * 1e3:>10.2f}{d['gbs']:>10.2f}{extra}")
    res["threads"][str(t)] = tr
print("RESULT " + json.dumps(res))

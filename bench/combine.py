"""combine.py -- used by bench/run.sh: reads the outputs of our benchmarks and their PyTorch /
LibTorch twins from one run directory, prints one combined table per mode (both sides and the
ratios, with the targets of the issue), and ends with exactly one line `RESULT {json}`.

Usage: python3 bench/combine.py overhead|large|all RUN_DIR
Inputs (any may be missing; a missing peer is reported, not fatal):
  ours_overhead.txt, libtorch_overhead.txt, pytorch_overhead.txt, ours_large.txt, torch_large.txt
"""
import json
import os
import sys
import time

mode, run_dir = sys.argv[1], sys.argv[2]


def read(name):
    p = os.path.join(run_dir, name)
    return open(p).read() if os.path.exists(p) else None


def result_json(name):
    text = read(name)
    if not text:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):])
            except json.JSONDecodeError:
                return None
    return None


def libtorch_table(name):
    """Rows of shared/bench/op_overhead.cpp's table: op fwd_grad bwd total fwd_nograd autograd."""
    text = read(name)
    if not text:
        return None
    out = {"lib": "libtorch", "ops": {}}
    for line in text.splitlines():
        if line.startswith("LibTorch "):
            out["version"] = line.split()[1]
        f = line.split()
        if len(f) == 6 and not f[0] == "op":
            try:
                v = [float(x) for x in f[1:]]
            except ValueError:
                continue
            out["ops"][f[0]] = dict(fwd_grad_us=v[0], bwd_us=v[1], total_us=v[2], fwd_nograd_us=v[3], autograd_us=v[4])
    return out if out["ops"] else None


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def fmt(x, spec=".2f", missing="-"):
    return missing if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


result = {
    "mode": mode,
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "cpu": cpu_model(),
    "nproc": os.cpu_count(),
    "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    "loadavg_1min_at_end": os.getloadavg()[0],
}
targets = {}
notes = []

if mode in ("overhead", "all"):
    ours = result_json("ours_overhead.txt")
    lt = libtorch_table("libtorch_overhead.txt")
    pt = result_json("pytorch_overhead.txt")
    sec = {"tapegrad": ours, "libtorch": lt, "pytorch": pt, "ratios": {}}
    print("==== per-op overhead, us/op (1 thread, chain of %s ops on %s floats, medians) ===="
          % (ours and ours["n"], ours and ours["numel"]))
    if ours:
        print("tapegrad: OpenBLAS core %s" % ours["blas_core"])
    if not lt:
        notes.append("LibTorch peer not run (libtorch-dev missing, BENCH_PEERS=0, or its build failed)")
    if not pt:
        notes.append("PyTorch peer not run (python3-torch missing or BENCH_PEERS=0)")
    hdr = ("op", "fwd_grad", "bwd", "total", "nograd", "LT total", "LT nograd", "PT total", "LT/ours", "PT/ours",
           "<1us", ">=4x LT")
    print("%-11s" % hdr[0] + "".join("%10s" % h for h in hdr[1:]))
    all_sub1, x4s = True, []
    for op, o in (ours or {}).get("ops", {}).items():
        l = (lt or {}).get("ops", {}).get(op, {})
        p = (pt or {}).get("ops", {}).get(op, {})
        r_lt = ratio(l.get("total_us"), o["total_us"])
        r_pt = ratio(p.get("total_us"), o["total_us"])
        sub1 = o["total_us"] < 1.0
        x4 = None if r_lt is None else r_lt >= 4.0
        all_sub1 &= sub1
        x4s.append(x4)
        sec["ratios"][op] = {"libtorch_over_ours_total": r_lt, "pytorch_over_ours_total": r_pt,
                             "libtorch_over_ours_nograd": ratio(l.get("fwd_nograd_us"), o["fwd_nograd_us"])}
        print("%-11s" % op + "".join("%10s" % s for s in (
            fmt(o["fwd_grad_us"], ".3f"), fmt(o["bwd_us"], ".3f"), fmt(o["total_us"], ".3f"),
            fmt(o["fwd_nograd_us"], ".3f"), fmt(l.get("total_us")), fmt(l.get("fwd_nograd_us")),
            fmt(p.get("total_us")), fmt(r_lt, ".1f") + ("x" if r_lt else ""), fmt(r_pt, ".1f") + ("x" if r_pt else ""),
            "yes" if sub1 else "NO", "-" if x4 is None else ("yes" if x4 else "NO"))))
    if ours:
        targets["overhead_below_1us_all_ops"] = all_sub1
        targets["overhead_4x_below_libtorch_all_ops"] = None if (not x4s or None in x4s) else all(x4s)
    print("(LT = LibTorch C++ %s, PT = PyTorch %s from Python; ratios are peer/ours: higher = we are faster)"
          % ((lt or {}).get("version", "n/a"), (pt or {}).get("torch", "n/a")))
    result["overhead"] = sec
    print()

if mode in ("large", "all"):
    ours = result_json("ours_large.txt")
    tl = result_json("torch_large.txt")
    if not tl:
        notes.append("PyTorch large-ops peer not run (python3-torch missing, BENCH_PEERS=0, or it failed)")
    sec = {"tapegrad": ours, "torch": tl, "ratios": {}}
    core_o = (ours or {}).get("blas_core", "?")
    core_t = (tl or {}).get("blas_core", "n/a")
    print("==== large ops (medians of %s after a warm-up); OpenBLAS core: ours %s, torch %s ===="
          % ((ours or {}).get("reps"), core_o, core_t))
    tcounts = list((ours or {}).get("threads", {}).keys())
    mm_ok, mem_ok = [], []
    for t in tcounts:
        o = ours["threads"][t]
        p = (tl or {}).get("threads", {}).get(t, {})
        rs = {}
        if "sgemm_gflops" in o:
            sg = o["sgemm_gflops"]
            print("\n-- matmul %sx%s fp32, %s thread(s): GFLOP/s (ratio to raw cblas_sgemm %.1f GFLOP/s) --"
                  % (ours["n"], ours["n"], t, sg))
            print("%-28s%12s%9s%12s%9s%12s" % ("measure", "tapegrad", "%sgemm", "torch", "%sgemm", "ours/torch"))
            for key, label in (("matmul_fwd_bwd_gflops", "fwd+bwd (3 GEMMs)"), ("matmul_fwd_gflops", "forward only"),
                               ("matmul_bwd_gflops", "backward only (2 GEMMs)")):
                ov, pv = o.get(key), p.get(key)
                print("%-28s%12s%9s%12s%9s%12s" % (label, fmt(ov, ".1f"), fmt(ratio(ov, sg) and 100 * ratio(ov, sg), ".1f"),
                                                   fmt(pv, ".1f"), fmt(ratio(pv, sg) and 100 * ratio(pv, sg), ".1f"),
                                                   fmt(ratio(ov, pv), ".2f")))
            print("%-28s%12s%9s%12s" % ("effective threads", fmt(o.get("matmul_cpu_per_wall")), "",
                                         fmt(p.get("matmul_cpu_per_wall"))))
            rs["matmul_fwd_bwd_over_sgemm"] = o["matmul_ratio"]
            rs["torch_matmul_fwd_bwd_over_sgemm"] = ratio(p.get("matmul_fwd_bwd_gflops"), sg)
            rs["matmul_fwd_bwd_ours_over_torch"] = ratio(o["matmul_fwd_bwd_gflops"], p.get("matmul_fwd_bwd_gflops"))
            ok = o["matmul_ratio"] >= 0.9
            mm_ok.append(ok)
            print("target: fwd+bwd >= 90%% of sgemm: %.1f%% -> %s" % (100 * o["matmul_ratio"], "met" if ok else "MISSED"))
        if "copy_gbs" in o:
            cp = o["copy_gbs"]
            pcp = p.get("copy_gbs")
            print("\n-- memory-bound ops, %s floats, %s thread(s): GB/s = (bytes read + written)/time;"
                  " copy: ours memcpy %.2f GB/s, torch copy_ %s GB/s --" % (ours["numel"], t, cp, fmt(pcp)))
            print("%-13s%10s%9s%11s%12s%10s%12s" % ("op", "tapegrad", "%copy", "torch", "torch out=", "%copy*", "ours/torch"))
            rs["ops"] = {}
            for op, ov in o["ops"].items():
                pv = p.get("ops", {}).get(op, {})
                r = ratio(ov["gbs"], cp)
                rp = ratio(pv.get("gbs"), pcp)
                print("%-13s%10s%9s%11s%12s%10s%12s" % (op, fmt(ov["gbs"]), fmt(100 * r, ".1f"), fmt(pv.get("gbs")),
                                                        fmt(pv.get("gbs_out")), fmt(rp and 100 * rp, ".1f"),
                                                        fmt(ratio(ov["gbs"], pv.get("gbs")), ".2f")))
                rs["ops"][op] = {"ours_over_copy": r, "torch_over_torch_copy": rp,
                                 "ours_over_torch": ratio(ov["gbs"], pv.get("gbs")),
                                 "ours_over_torch_out": ratio(ov["gbs"], pv.get("gbs_out"))}
            print("%-13s%10s   (tapegrad, process CPU time / wall time)" % ("eff. threads", fmt(o.get("mem_cpu_per_wall"))))
            worst = min(o["ops"].items(), key=lambda kv: kv[1]["ratio_copy"])
            ok = worst[1]["ratio_copy"] >= 0.7
            if t == tcounts[-1]:
                mem_ok.append(ok)
            print("(*torch's op as %% of torch's own copy_)  target: >= 70%% of copy: worst %s %.1f%% -> %s"
                  % (worst[0], 100 * worst[1]["ratio_copy"], "met" if ok else "MISSED"))
        sec["ratios"][t] = rs
    if mm_ok:
        targets["matmul_fwd_bwd_90pct_sgemm_all_thread_counts"] = all(mm_ok)
    if mem_ok:
        targets["mem_ops_70pct_copy_at_%s_threads" % tcounts[-1]] = all(mem_ok)
    result["large"] = sec
    print()

for n in notes:
    print("note: " + n)
result["targets"] = targets
result["notes"] = notes
print("targets: " + ", ".join("%s=%s" % (k, {True: "met", False: "MISSED", None: "n/a"}[v]) for k, v in targets.items()))
print("RESULT " + json.dumps(result, separators=(",", ":")))

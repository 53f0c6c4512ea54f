"""combine_train.py -- used by `bench/run.sh train`: reads the RESULT lines of bench_train (ours) and
shared/bench/torch_lm.py (PyTorch) from one run directory (files train_{ours,torch}_<config>_<threads>_<run>.txt),
prints one table (medians over the runs of each side's median step time) with the ratios, and ends
with exactly one line `RESULT {json}`.

Usage: python3 bench/combine_train.py RUN_DIR
"""
import glob
import json
import os
import re
import statistics
import sys
import time

run_dir = sys.argv[1]


def result(path):
    for line in reversed(open(path).read().splitlines()):
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):])
            except json.JSONDecodeError:
                return None
    return None


# runs[(config, threads)][side] = [result, ...]
runs = {}
for path in sorted(glob.glob(os.path.join(run_dir, "train_*_*_*_*.txt"))):
    m = re.match(r"train_(ours|torch)_(\w+?)_(\d+)_(\d+)\.txt$", os.path.basename(path))
    r = result(path) if m else None
    if r:
        runs.setdefault((m.group(2), int(m.group(3))), {}).setdefault(m.group(1), []).append(r)

order = {"micro": 0, "small": 1, "tiny": 2}


def med(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def f(x, spec):
    return "-" if x is None else format(x, spec)


rows = []
print("| config | threads | tapegrad tok/s | PyTorch tok/s | ours / PyTorch | tapegrad GFLOP/s | % of sgemm 2048³ "
      "| peak RSS ours / PyTorch (MiB) | runs |")
print("|---|---|---|---|---|---|---|---|---|")
for (cfg, t) in sorted(runs, key=lambda k: (order.get(k[0], 9), k[1])):
    ours, torch = runs[(cfg, t)].get("ours", []), runs[(cfg, t)].get("torch", [])
    o_tps, p_tps = med(ours, "tokens_per_s"), med(torch, "tokens_per_s")
    o_gf, sgemm = med(ours, "gflops_per_s"), med(ours, "sgemm_gflops")
    o_rss, p_rss = med(ours, "peak_rss_mib"), med(torch, "peak_rss_mib")
    ratio = o_tps / p_tps if o_tps and p_tps else None
    pct = 100 * o_gf / sgemm if o_gf and sgemm else None
    print(f"| {cfg} | {t} | {f(o_tps, ',.0f')} | {f(p_tps, ',.0f')} | {f(ratio, '.2f')}× | {f(o_gf, '.1f')} | "
          f"{f(pct, '.1f')} % of {f(sgemm, '.0f')} | {f(o_rss, '.0f')} / {f(p_rss, '.0f')} | {len(ours)} / {len(torch)} |")
    rows.append(dict(config=cfg, threads=t, tapegrad_tokens_per_s=o_tps, torch_tokens_per_s=p_tps,
                     ratio_tokens_per_s=ratio, tapegrad_gflops_per_s=o_gf, sgemm_gflops=sgemm, pct_of_sgemm=pct,
                     torch_gflops_per_s=med(torch, "gflops_per_s"), tapegrad_peak_rss_mib=o_rss,
                     torch_peak_rss_mib=p_rss, tapegrad_step_s=med(ours, "step_s_median"),
                     torch_step_s=med(torch, "step_s_median"), runs_ours=len(ours), runs_torch=len(torch),
                     tapegrad_fwd_s=med(ours, "fwd_s_median"), tapegrad_bwd_s=med(ours, "bwd_s_median"),
                     tapegrad_opt_s=med(ours, "opt_s_median"), torch_fwd_s=med(torch, "fwd_s_median"),
                     torch_bwd_s=med(torch, "bwd_s_median"), torch_opt_s=med(torch, "opt_s_median")))
print("(tok/s and step times: median over the runs of each run's median step; sgemm: raw cblas_sgemm 2048³ at the "
      "same thread count, in the same process as ours)")
cpu = "unknown"
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except (OSError, StopIteration):
    pass
print("RESULT " + json.dumps(dict(mode="train", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cpu=cpu,
                                  nproc=os.cpu_count(), openblas_coretype_env=os.environ.get("OPENBLAS_CORETYPE"),
                                  loadavg_1min_at_end=os.getloadavg()[0], rows=rows)))

"""combine_tool.py -- used by `bench/run.sh tool`: the command-line tool's training loop (`tapegrad train`) against
the bare training step (bench_train) and PyTorch 2.x (shared/bench/torch_lm_modern.py, eager and torch.compile),
from the raw files of one run directory:
  tool_bench_<config>_<threads>_<run>.txt    bench_train's output (its RESULT line: tokens_per_s)
  tool_tool_<config>_<threads>_<run>.jsonl   the tool's metrics.jsonl (one "train" line per step)
  tool_torch2_<config>_<threads>_<run>.txt   torch_lm_modern.py's output (RESULT lines, modes fp32 / fp32c)
Prints one table (medians over the runs), the CPU and OpenBLAS settings, and ends with exactly one line
`RESULT {json}`. Plain python3, no third-party packages.

Usage: python3 bench/combine_tool.py RUN_DIR WARMUP_STEPS
"""
import glob
import json
import os
import re
import statistics
import sys
import time

from bench_host import cpu_model, openblas_coretype, result_lines

TARGET = 0.97  # the tool's tokens/s over bench_train's

run_dir, warmup = sys.argv[1], int(sys.argv[2])


def results(path):
    """Every parseable `RESULT {json}` line of a program's output file."""
    with open(path, errors="replace") as f:
        return result_lines(f.read())


def tool_rates(path):
    """(wall-clock tokens/s from step `warmup` to the last step, median of the per-step tokens/s after the warm-up,
    timed steps), or None. The wall-clock rate covers everything the loop does between those two log lines:
    batches from the token file, forward/backward, gradient norm and clipping, AdamW, the metrics.jsonl lines."""
    steps = {}
    with open(path, errors="replace") as f:
        for line in f:
            try:
                m = json.loads(line)
            except json.JSONDecodeError:
                continue
            if m.get("kind") == "train" and "step" in m:
                steps[m["step"]] = m
    if warmup not in steps or not steps or max(steps) <= warmup:
        return None
    a, b = steps[warmup], steps[max(steps)]
    dt = b["wall_s"] - a["wall_s"]
    if dt <= 0:
        return None
    per_step = [m["tokens_per_s"] for s, m in steps.items() if s > warmup and m.get("tokens_per_s")]
    return ((b["tokens"] - a["tokens"]) / dt, statistics.median(per_step) if per_step else None, max(steps) - warmup)


# runs[(config, threads)] = {"bench": [tok/s], "tool": [tok/s], "tool_step": [tok/s], "eager": [...], "compile": [...]}
runs, cores, torch_version, errors = {}, set(), None, []
for path in sorted(glob.glob(os.path.join(run_dir, "tool_*_*_*_*.*"))):
    m = re.match(r"tool_(bench|tool|torch2)_(\w+?)_(\d+)_(\d+)\.(txt|jsonl)$", os.path.basename(path))
    if not m:
        continue
    side, key = m.group(1), (m.group(2), int(m.group(3)))
    row = runs.setdefault(key, {})
    if side == "bench" and m.group(5) == "txt":
        for r in results(path):
            if r.get("tokens_per_s"):
                row.setdefault("bench", []).append(r["tokens_per_s"])
                row["timed_steps"] = r.get("steps")
            if r.get("openblas_core"):
                cores.add(r["openblas_core"])
    elif side == "tool" and m.group(5) == "jsonl":
        rates = tool_rates(path)
        if rates:
            row.setdefault("tool", []).append(rates[0])
            if rates[1]:
                row.setdefault("tool_step", []).append(rates[1])
    elif side == "torch2":
        with open(path, errors="replace") as f:
            for line in f:  # the script's first line: "<torch version> cpu"
                v = re.match(r"(\d+\.\d+\S*) cpu$", line.strip())
                if v:
                    torch_version = v.group(1)
                    break
        for r in results(path):
            col = {"fp32": "eager", "fp32c": "compile"}.get(r.get("mode"))
            if col and r.get("tok_s"):
                row.setdefault(col, []).append(r["tok_s"])
            elif col and r.get("error"):
                errors.append(f"{key[0]} {key[1]} thread(s) {r['mode']}: {r['error']}")

order = {"micro": 0, "small": 1, "tiny": 2}


def med(row, col):
    vals = row.get(col, [])
    return statistics.median(vals) if vals else None


def f(x, spec):
    return "-" if x is None else format(x, spec)


rows = []
print("| config | threads | bench_train tok/s | tapegrad train tok/s | tool / bench_train (target ≥ 97 %) "
      "| PyTorch 2 eager tok/s | torch.compile tok/s | runs |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted(runs, key=lambda k: (order.get(k[0], 9), k[1])):
    cfg, t = key
    row = runs[key]
    bench, tool, eager, comp = med(row, "bench"), med(row, "tool"), med(row, "eager"), med(row, "compile")
    ratio = tool / bench if tool and bench else None
    met = None if ratio is None else ratio >= TARGET
    mark = "" if met is None else (" ✓" if met else " ✗")
    n = "/".join(str(len(row.get(c, []))) for c in ("bench", "tool", "eager", "compile"))
    print(f"| {cfg} | {t} | {f(bench, ',.0f')} | {f(tool, ',.0f')} | {f(None if ratio is None else 100 * ratio, '.1f')} %"
          f"{mark} | {f(eager, ',.0f')} | {f(comp, ',.0f')} | {n} |")
    rows.append(dict(config=cfg, threads=t, timed_steps=row.get("timed_steps"), bench_train_tokens_per_s=bench,
                     tool_tokens_per_s=tool, tool_step_median_tokens_per_s=med(row, "tool_step"),
                     ratio_tool_over_bench=ratio, target_met=met, torch2_eager_tokens_per_s=eager,
                     torch2_compile_tokens_per_s=comp, runs_bench=row.get("bench", []), runs_tool=row.get("tool", []),
                     runs_torch2_eager=row.get("eager", []), runs_torch2_compile=row.get("compile", [])))
print(f"(medians over the runs, listed bench_train/tool/eager/compile. bench_train and PyTorch: tokens per step over "
      f"each run's median step time, after {warmup} warm-up steps; bench_train draws its batches with randint and "
      f"does no gradient clipping. tapegrad train: the wall-clock rate of its whole loop from step {warmup} to the "
      f"last step, from metrics.jsonl (tokens / wall_s between the two lines): batches read from a token file of "
      f"uniform random ids, the gradient norm and clipping (1.0), AdamW, a metrics.jsonl line every step, no "
      f"evaluation; its start-up and the final checkpoint lie outside that window. PyTorch 2: "
      f"shared/bench/torch_lm_modern.py --device cpu, fp32 eager and fp32 torch.compile (fused qkv, SDPA, "
      f"AdamW(fused=True)), torch {torch_version or 'not run'})")
for e in errors:
    print(f"(PyTorch 2 error: {e})")

cpu = cpu_model()
coretype = openblas_coretype()
print(f"CPU: {cpu} ({os.cpu_count()} CPUs) | OPENBLAS_CORETYPE={coretype or '<unset>'} | OpenBLAS core (tapegrad): "
      f"{', '.join(sorted(cores)) or 'unknown'} | load average at the end {os.getloadavg()[0]:.2f}")
ratios = [r["ratio_tool_over_bench"] for r in rows if r["ratio_tool_over_bench"] is not None]
print("RESULT " + json.dumps(dict(mode="tool", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cpu=cpu,
                                  nproc=os.cpu_count(), openblas_coretype_env=coretype,
                                  openblas_core=sorted(cores), torch2_version=torch_version, warmup_steps=warmup,
                                  target_ratio=TARGET, all_targets_met=(all(x >= TARGET for x in ratios)
                                                                        if ratios else None),
                                  loadavg_1min_at_end=os.getloadavg()[0], rows=rows)))

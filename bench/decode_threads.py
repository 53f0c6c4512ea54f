"""decode_threads.py -- batch-1 decoding speed of `tapegrad generate` by thread count, the measurements behind
lm/decode_threads.h (the default --threads of generate and chat). For each model it runs the tool with each
--threads count, interleaved (model by model, count by count, run after run), so that a machine whose load changes
affects every count alike; greedy, --no-stop, the same prompt; each run's decode tok/s is read from the tool's
stderr line ("decode: M tokens in S s (D tok/s)"). Prints one table (medians over the runs, the ratio of each count
to 1 thread, the 1-minute load average seen before the runs) and ends with exactly one line `RESULT {json}`.
Plain python3.

Usage: python3 bench/decode_threads.py TOOL [--runs 5] [--threads 1,2] NAME=CHECKPOINT[:TOKENS] ...
  e.g. python3 bench/decode_threads.py build/tools/tapegrad s260k=runs/s260k:400 micro=runs/micro:56
TOKENS (default 128) is --max-tokens; keep prompt + TOKENS within the model's context to time the KV-cache path.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

from bench_host import cpu_model, openblas_coretype

DECODE_RE = re.compile(r"decode: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s")
PARAMS_RE = re.compile(r"parameters (\d+)")


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def parameters(tool, checkpoint):
    out = subprocess.run([tool, "info", "--checkpoint", checkpoint], capture_output=True, text=True).stdout
    m = PARAMS_RE.search(out)
    return int(m.group(1)) if m else None


def decode_rate(tool, checkpoint, tokens, threads):
    cmd = [tool, "generate", "--checkpoint", checkpoint, "--prompt", "Once upon a time", "--greedy", "--no-stop",
           "--max-tokens", str(tokens), "--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = DECODE_RE.search(r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"decode_threads.py: {' '.join(cmd)} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return float(m.group(3))  # printed to 0.1 tok/s; the seconds only to 0.01 s


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    tool, rest = argv[1], argv[2:]
    runs, counts, models = 5, [1, 2], []
    while rest:
        a = rest.pop(0)
        if a == "--runs":
            runs = int(rest.pop(0))
        elif a == "--threads":
            counts = [int(t) for t in rest.pop(0).split(",")]
        else:
            name, _, spec = a.partition("=")
            path, _, tokens = spec.partition(":")
            if not name or not path:
                sys.exit(f"decode_threads.py: '{a}' is not NAME=CHECKPOINT[:TOKENS]")
            models.append((name, path, int(tokens or 128)))
    rates = {(m[0], t): [] for m in models for t in counts}
    loads = []
    for _ in range(runs):
        for name, path, tokens in models:
            for t in counts:
                loads.append(load1())
                rates[(name, t)].append(decode_rate(tool, path, tokens, t))
    print(f"batch-1 decode, tok/s (median of {runs} interleaved runs); CPU {cpu_model()}, {os.cpu_count()} cores, "
          f"OPENBLAS_CORETYPE={openblas_coretype()}, 1-min load average {min(loads):.1f}–{max(loads):.1f} "
          f"(median {statistics.median(loads):.1f})")
    head = f"| model | parameters | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in counts)
    head += " | " + " | ".join(f"{t} / 1" for t in counts[1:]) + " |"
    print(head)
    print("|" + "---|" * (2 + 2 * len(counts) - 1))
    result = {"kind": "decode_threads", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(),
              "cores": os.cpu_count(), "runs": runs, "load1_min": min(loads), "load1_max": max(loads),
              "load1_median": statistics.median(loads), "models": {}}
    for name, path, tokens in models:
        p = parameters(tool, path)
        med = {t: statistics.median(rates[(name, t)]) for t in counts}
        cells = [f"{med[t]:,.0f}" for t in counts] + [f"{med[t] / med[counts[0]]:.2f}" for t in counts[1:]]
        size = f"{p / 1e6:.2f} M" if p else "?"
        print(f"| {name} | {size} | " + " | ".join(cells) + " |")
        result["models"][name] = {"parameters": p, "tokens": tokens,
                                  "tok_s": {str(t): med[t] for t in counts},
                                  "runs_tok_s": {str(t): rates[(name, t)] for t in counts}}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)

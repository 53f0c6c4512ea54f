#!/usr/bin/env python3
"""kernel_times.py — where one GPU training step spends its time, per kernel, from Nsight Compute.

Input: the output of
  ncu --csv --metrics gpu__time_duration.sum --print-units base bench_train --device cuda ... --steps 1 --warmup 0
(scripts/gpu_check.sh writes it as ncu_step.csv; lines that are not CSV rows are skipped).
Prints a Markdown table: kernel (short name), launches, total ms, share of the summed kernel time.
Kernels are serialized under ncu, so the sum is the step's GPU busy time, not its wall time.
"""
import csv
import re
import sys
from collections import defaultdict


def short_name(name: str) -> str:
    """'void tapegrad::<unnamed>::forward_kernel<float, 4>(...)' -> 'forward_kernel<float, 4>'."""
    name = re.sub(r"^void ", "", name).replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # drop the parameter list (the first '(' at template depth 0)
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    # drop namespaces outside the template arguments
    head, sep, tail = name.partition("<")
    return head.split("::")[-1] + sep + tail


def main(path: str) -> None:
    rows = []
    with open(path, newline="", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    reader = csv.DictReader(lines)
    for row in reader:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            ns = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        rows.append((short_name(row.get("Kernel Name", "?")), ns))
    if not rows:
        print(f"kernel_times.py: no gpu__time_duration rows in {path}")
        return
    total = sum(ns for _, ns in rows)
    by_name = defaultdict(lambda: [0, 0.0])
    for name, ns in rows:
        by_name[name][0] += 1
        by_name[name][1] += ns
    print(f"{len(rows)} kernel launches, {total / 1e6:.2f} ms of kernel time")
    print("| kernel | launches | ms | share |")
    print("|---|---|---|---|")
    for name, (count, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name[:90]} | {count} | {ns / 1e6:.3f} | {100 * ns / total:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ncu_step.csv")

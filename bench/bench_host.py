"""bench_host.py — shared by combine_tool.py and combine_generate.py: the `RESULT {json}` lines of a
program's output, and what every table ends with: this machine's CPU model (lscpu, else /proc/cpuinfo)
and OPENBLAS_CORETYPE."""
import json
import os
import subprocess


def result_lines(text):
    """Every parseable `RESULT {json}` line of a program's output, as dicts."""
    out = []
    for line in text.splitlines():
        if line.startswith("RESULT "):
            try:
                out.append(json.loads(line[len("RESULT "):]))
            except json.JSONDecodeError:
                pass
    return out


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        cpu = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), None)
        if cpu:
            return cpu
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def openblas_coretype():
    return os.environ.get("OPENBLAS_CORETYPE")

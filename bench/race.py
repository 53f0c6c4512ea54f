#!/usr/bin/env python3
"""race.py — tapegrad against nanoGPT's own CPU recipe on tiny-shakespeare, character level (issue 34, §5).

On this machine, in one run, at each thread count (default 1 and 2), one after the other:
  (a) nanoGPT's train.py with its README's CPU command (../shared/bench/peers/nanogpt, PyTorch 2.x), then its
      checkpoint evaluated over the WHOLE validation split (bench/race_eval_nanogpt.py; nanoGPT prints a
      20-batch estimate);
  (b) `tapegrad train` with nanoGPT's recipe and shapes (AdamW, cosine, lr 1e-3 → 1e-4, warm-up 100, β2 0.99,
      4 layers, 4 heads, C 128, T 64, batch 12, 2000 steps, tied embeddings), evaluated every 100 steps;
  (c) `tapegrad train --recipe modern` (Muon + AdamW, warmup–stable–decay) with the same shapes: a short run
      of --modern-steps steps, and a long one given about nanoGPT's wall-clock time.
Both sides read the same split (nanoGPT's prepare.py: the first 90 % of the characters train, the last 10 %
validate; tapegrad's byte tokenizer without merges gives the same tokens, the text being ASCII) and report
the mean loss in nats per character over every validation window ((N − 1) // 64 windows of 64).

Times are the wall-clock of each whole command (start-up, training, evaluations, checkpoints) unless the column
says "train": that excludes tapegrad's evaluations every 100 steps, which nanoGPT does not do.
Prints a table and one `RESULT {json}` line per run.

    python3 bench/race.py [--tool build/tools/tapegrad] [--python /opt/torch2/bin/python] [--threads 1,2]
                          [--modern-steps 250] [--work DIR]
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NANOGPT_CMD = ["train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
               "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
               "--n_embd=128", "--max_iters=2000", "--lr_decay_iters=2000", "--dropout=0.0"]
SHAPES = ["--vocab-size", "256", "--layers", "4", "--heads", "4", "--d-model", "128", "--context", "64",
          "--batch-size", "12", "--tie-embeddings", "true", "--beta2", "0.99"]
NANOGPT_RECIPE = ["--steps", "2000", "--lr", "1e-3", "--min-lr", "1e-4", "--warmup-steps", "100"]


def run(cmd, env=None, cwd=None, log=None):
    """Runs cmd, returns (wall seconds, stdout). Raises with the output's tail on failure."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    if log:
        Path(log).write_text(p.stdout)
    if p.returncode != 0:
        sys.exit(f"race.py: {' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return wall, p.stdout


def thread_env(n):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(n), MKL_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n))
    return env


def prepare(work, shared, python, tool):
    """nanoGPT's folder with its data, and tapegrad's byte-level token files of the same split."""
    ng = work / "nanogpt"
    if not (ng / "data/shakespeare_char/val.bin").exists():
        shutil.rmtree(ng, ignore_errors=True)
        shutil.copytree(shared / "bench/peers/nanogpt", ng)
        for p in ng.rglob("*"):
            p.chmod(p.stat().st_mode | 0o200)
        shutil.copy(shared / "data/corpora/tinyshakespeare.txt", ng / "data/shakespeare_char/input.txt")
        run([python, "data/shakespeare_char/prepare.py"], cwd=ng)
    text = (ng / "data/shakespeare_char/input.txt").read_bytes()
    n = len(text)
    split = int(n * 0.9)  # prepare.py's split
    (work / "train.txt").write_bytes(text[:split])
    (work / "val.txt").write_bytes(text[split:])
    run([tool, "tokenize", "train", "--input", work / "train.txt", "--vocab-size", "256", "--special", "none",
         "--out", work / "bytetok"])
    for part in ("train", "val"):
        run([tool, "tokenize", "encode", "--tokenizer", work / "bytetok", "--input", work / f"{part}.txt",
             "--out", work / f"{part}.bin"])
    return ng


def metrics(run_dir):
    """(train records, eval records) of a run's metrics.jsonl."""
    train, evals = [], []
    for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        (evals if r["kind"] == "eval" else train).append(r)
    return train, evals


def training_time_curve(run_dir):
    """[(step, training seconds without the evaluations before it, val loss)] for each evaluation."""
    train, evals = metrics(run_dir)
    at_step = {r["step"]: r["wall_s"] for r in train}
    curve, eval_seconds = [], 0.0
    for e in evals:
        step_end = at_step.get(e["step"], e["wall_s"])
        curve.append((e["step"], step_end - eval_seconds, e["val_loss"]))
        eval_seconds += e["wall_s"] - step_end  # this evaluation (and the plot written with it)
    return curve


def final_loss(stdout):
    m = re.search(r"final validation loss ([0-9.]+)", stdout)
    if not m:
        sys.exit(f"race.py: no final validation loss in:\n{stdout[-2000:]}")
    return float(m.group(1))


def tapegrad_run(tool, work, name, threads, extra):
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [tool, "train", "--train", work / "train.bin", "--val", work / "val.bin", *SHAPES, *extra,
           "--threads", str(threads), "--print-every", "500", "--out", out]
    wall, stdout = run(cmd, env=thread_env(threads), log=work / f"{name}.log")
    train, _ = metrics(out)
    return dict(wall_s=wall, loss=final_loss(stdout), steps=train[-1]["step"],
                train_s_per_step=train[-1]["wall_s"] / train[-1]["step"], dir=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", default=str(HERE.parent / "build/tools/tapegrad"))
    ap.add_argument("--python", default="/opt/torch2/bin/python")
    ap.add_argument("--shared", default=str(HERE.parent.parent / "shared"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--modern-steps", type=int, default=250)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tapegrad_race_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tool, shared = str(Path(args.tool).resolve()), Path(args.shared).resolve()
    ng = prepare(work, shared, args.python, tool)
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    print(f"race: {cpu}, nanoGPT on PyTorch {torch_version}; work folder {work}")
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        env = thread_env(threads)
        out_dir = f"out-race-t{threads}"
        shutil.rmtree(ng / out_dir, ignore_errors=True)
        t_nano, _ = run([args.python, *NANOGPT_CMD, f"--out_dir={out_dir}"], env=env, cwd=ng,
                        log=work / f"nanogpt_t{threads}.log")
        _, ev = run([args.python, HERE / "race_eval_nanogpt.py", ng, ng / out_dir / "ckpt.pt",
                     ng / "data/shakespeare_char/val.bin"], env=env)
        nano = json.loads(ev.strip().splitlines()[-1])
        target = nano["loss"]
        rows.append(dict(threads=threads, run="nanoGPT (its README's CPU recipe)", steps=2000, wall_s=t_nano,
                         loss=target, note=f"checkpoint of iter {nano['iter']}"))
        # (b) nanoGPT's recipe in tapegrad, evaluated every 100 steps (the curve gives the time to nanoGPT's loss)
        b = tapegrad_run(tool, work, f"classic_t{threads}", threads, [*NANOGPT_RECIPE, "--eval-every", "100"])
        curve = training_time_curve(b["dir"])
        cross = next(((s, t) for s, t, l in curve if l <= target), None)
        train_s = curve[-1][1]
        rows.append(dict(threads=threads, run="tapegrad, nanoGPT's recipe (AdamW, cosine)", steps=b["steps"],
                         wall_s=b["wall_s"], loss=b["loss"], train_s=train_s,
                         reach_step=cross[0] if cross else None, reach_s=cross[1] if cross else None))
        # (c) the modern recipe: a short run, then one as long as nanoGPT's wall-clock allows
        c = tapegrad_run(tool, work, f"modern_t{threads}", threads, ["--recipe", "modern", "--steps",
                                                                      str(args.modern_steps)])
        rows.append(dict(threads=threads, run="tapegrad --recipe modern", steps=c["steps"], wall_s=c["wall_s"],
                         loss=c["loss"]))
        overhead = c["wall_s"] - c["train_s_per_step"] * c["steps"]  # start-up and the final evaluation
        long_steps = int((t_nano - overhead) / c["train_s_per_step"] * 0.92)  # a margin: step times wander
        d = tapegrad_run(tool, work, f"modern_long_t{threads}", threads, ["--recipe", "modern", "--steps",
                                                                           str(long_steps)])
        rows.append(dict(threads=threads, run="tapegrad --recipe modern, nanoGPT's time", steps=d["steps"],
                         wall_s=d["wall_s"], loss=d["loss"]))
        for r in rows[-4:]:
            r["nanogpt_wall_s"], r["nanogpt_loss"] = t_nano, target
    print()
    print("| threads | run | steps | wall s | % of nanoGPT's time | val loss (nats/char) | bits/byte | "
          "Δ vs nanoGPT | time to nanoGPT's loss |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        reach = ""
        if "reach_s" in r:
            share = 100 * r["reach_s"] / r["nanogpt_wall_s"] if r["reach_s"] is not None else 0
            reach = (f"step {r['reach_step']}, {r['reach_s']:.1f} s train ({share:.0f} %)"
                     if r["reach_s"] is not None else "not reached")
        elif r["run"].startswith("tapegrad") and r["loss"] <= r["nanogpt_loss"]:
            reach = "the whole run"
        print(f"| {r['threads']} | {r['run']} | {r['steps']} | {r['wall_s']:.1f} | "
              f"{100 * r['wall_s'] / r['nanogpt_wall_s']:.1f} % | {r['loss']:.4f} | {r['loss'] / math.log(2):.4f} | "
              f"{r['loss'] - r['nanogpt_loss']:+.4f} | {reach} |")
    for r in rows:
        r = {k: v for k, v in r.items() if k != "dir"}
        r["bits_per_byte"] = r["loss"] / math.log(2)
        print("RESULT " + json.dumps(dict(bench="race_nanogpt_shakespeare_char", cpu=cpu, **r)))


if __name__ == "__main__":
    main()

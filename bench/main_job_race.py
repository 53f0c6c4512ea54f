"""main_job_race.py — the main job's setup with each recipe, tapegrad and PyTorch side by side (issue 34 §5).

The TinyStories excerpt (corpus/tinystories_head.txt), split by documents like `train --text` (the last 10 % held
out), a byte-level BPE of 2048 tokens trained on it, the main job's model (C 128, 4 layers, 4 heads, T 128, batch
16, untied head) and steps (800): `tapegrad train` with the classic recipe (AdamW 3e-3, cosine, warm-up 50) and
with the main job's `--recipe modern --lr 3e-3` (Muon, QK-norm, WSD), and bench/torch_peer_train.py (the same
model, data, init, optimizers and schedules in PyTorch; torch.optim.Muon for the modern one) with each. Held-out loss over every window of the
validation tokens at each evaluation; the table gives it at equal steps and at equal training time (each run's
curve read at the time the fastest run needed for all its steps), and the step at which each modern run reaches
the classic run's final loss (issue 34's target: ≤ 60 % of the steps).

    python3 bench/main_job_race.py [--tool build/tools/tapegrad] [--python /opt/torch2/bin/python] [--threads 1]
                                   [--steps 800] [--runs tapegrad-classic,tapegrad-modern,torch-classic,torch-modern]
"""
import argparse
import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from race import HERE, run, thread_env, training_time_curve  # noqa: E402

SEPARATOR = "<|endoftext|>"
SHAPES = ["--context", "128", "--d-model", "128", "--layers", "4", "--heads", "4", "--batch-size", "16"]
CLASSIC = ["--lr", "3e-3", "--warmup-steps", "50"]  # the main job until 2026-12-05
MODERN = ["--recipe", "modern", "--lr", "3e-3", "--warmup-steps", "50"]  # scripts/run.sh: the main job


def prepare(work, tool, corpus):
    """train.bin / val.bin: the documents split 90/10 as `train --text` splits them, BPE 2048 on the corpus."""
    text = Path(corpus).read_text(encoding="utf-8")
    docs = [d for d in text.split(SEPARATOR) if d.strip()]
    n_val = max(1, round(len(docs) * 0.1))
    (work / "train.txt").write_text(SEPARATOR.join(docs[:-n_val]) + SEPARATOR, encoding="utf-8")
    (work / "val.txt").write_text(SEPARATOR.join(docs[-n_val:]) + SEPARATOR, encoding="utf-8")
    if not (work / "tok/tokenizer.json").exists():
        run([tool, "tokenize", "train", "--input", corpus, "--vocab-size", "2048", "--out", work / "tok"])
    for part in ("train", "val"):
        run([tool, "tokenize", "encode", "--tokenizer", work / "tok", "--input", work / f"{part}.txt",
             "--out", work / f"{part}.bin"])


def loss_at_time(curve, t):
    """The loss a curve [(step, train_s, loss)] had reached by training time t (linear between evaluations)."""
    prev = (0, 0.0, None)
    for step, s, loss in curve:
        if s >= t:
            if prev[2] is None:
                return None
            return prev[2] + (loss - prev[2]) * (t - prev[1]) / (s - prev[1])
        prev = (step, s, loss)
    return curve[-1][2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", default=str(HERE.parent / "build/tools/tapegrad"))
    ap.add_argument("--python", default="/opt/torch2/bin/python")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--runs", default="tapegrad-classic,tapegrad-modern,torch-classic,torch-modern")
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tapegrad_mainjob_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tool = str(Path(args.tool).resolve())
    prepare(work, tool, str(HERE.parent / "corpus/tinystories_head.txt"))
    env = thread_env(args.threads)
    steps = ["--steps", str(args.steps), "--eval-every", str(args.eval_every)]
    curves = {}
    for name in args.runs.split(","):
        side, recipe = name.split("-")
        flags = CLASSIC if recipe == "classic" else MODERN
        if side == "tapegrad":
            out = work / name
            shutil.rmtree(out, ignore_errors=True)  # a fresh run each time
            run([tool, "train", "--train", work / "train.bin", "--val", work / "val.bin", *SHAPES, *flags, *steps,
                 "--threads", str(args.threads), "--print-every", "100", "--out", out], env=env, log=work / f"{name}.log")
            curves[name] = training_time_curve(out)
        else:
            _, stdout = run([args.python, HERE / "torch_peer_train.py", "--train", work / "train.bin", "--val",
                             work / "val.bin", *SHAPES, *flags, *steps, "--threads", str(args.threads)],
                            env=env, log=work / f"{name}.log")
            result = json.loads(stdout.strip().splitlines()[-1][len("RESULT "):])
            curves[name] = [(p["step"], p["train_s"], p["val_loss"]) for p in result["curve"]]
        print(f"{name}: final held-out loss {curves[name][-1][2]:.4f} after {curves[name][-1][1]:.1f} s of training",
              flush=True)
    names = list(curves)
    evals = [s for s, _, _ in curves[names[0]]]
    print(f"\nheld-out loss (nats/token) at equal steps, {args.threads} thread(s):\n")
    print("| run | " + " | ".join(str(s) for s in evals) + " | training s |")
    print("|---|" + "---|" * (len(evals) + 1))
    for n in names:
        by_step = {s: l for s, _, l in curves[n]}
        print(f"| {n} | " + " | ".join(f"{by_step[s]:.4f}" if s in by_step else "" for s in evals) +
              f" | {curves[n][-1][1]:.1f} |")
    t_min = min(c[-1][1] for c in curves.values())
    print(f"\nat equal training time ({t_min:.1f} s, the fastest run's whole training):\n")
    print("| run | held-out loss | step at which it reaches the classic run's final loss |")
    print("|---|---|---|")
    rows = []
    for n in names:
        at = loss_at_time(curves[n], t_min)
        classic = curves.get(n.split("-")[0] + "-classic")
        reach = None
        if classic and n.endswith("-modern"):
            reach = next((s for s, _, l in curves[n] if l <= classic[-1][2]), None)
        print(f"| {n} | {'' if at is None else f'{at:.4f}'} | "
              f"{'' if not n.endswith('-modern') else (f'{reach} ({100 * reach / args.steps:.0f} %)' if reach else 'not reached')} |")
        rows.append(dict(run=n, curve=curves[n], loss_at_equal_time=at, equal_time_s=t_min, reach_classic_step=reach))
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    for r in rows:
        print("RESULT " + json.dumps(dict(bench="main_job_recipes", cpu=cpu, threads=args.threads, steps=args.steps,
                                          **r)))


if __name__ == "__main__":
    main()

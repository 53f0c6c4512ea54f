"""int8_sizes.py -- from what model size int8 generation pays on the CPU: tokens/s of `tapegrad generate
--threads 1` (batch 1, greedy, --no-stop) in float32, int8 in groups of 64 (`quantize`, the default) and int8 in
groups of 4 (`quantize --group 4`, the groups llama2.c's runq.c can run for stories260K), per model size:
stories260K (imported from ../shared/data/llama2c), the micro, small and tiny presets and two sizes between
them (micro widened to d_model 128 × 4 layers and 192 × 6: --custom) (random weights: one training step on
random token ids; the speed does not depend on the weights). Beside them, for stories260K,
llama2.c's runq.c (gcc -Ofast -march=native, one thread) on our `export llama2c --version 2` of the same model
(groups of 4), when gcc and ../shared/bench/peers/llama2c/runq.c are there.

  python3 bench/int8_sizes.py --tool build/tools/tapegrad [--shared ../shared] [--runs 7] [--tokens 500]
                              [--before OLD_TOOL]

--before runs another build of the tool (e.g. the commit before a change) on the same files, interleaved with
ours, and adds its int8 columns: a before/after comparison measured side by side.

Builds nothing of ours (pass the tool). Two rates per program: the decode tok/s the program prints (wall clock),
and tok/s from CPU time: (N − 10) / (CPU seconds of a run of N tokens − CPU seconds of a run of 10), which leaves
out loading, the prompt and the time spent waiting for a core, so it moves far less on a shared machine (the main
table). Every program runs once per round, the rounds interleave the programs, and the tables show medians over
the rounds; quote the ratios, which are measured side by side. Prints the tables and one `RESULT {json}` line.
Everything is written to a temp directory, deleted at the end.
"""
import argparse, array, json, os, random, re, shutil, statistics, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, with_cpu=False):
    """Runs cmd; returns its stdout+stderr (and, with_cpu, the CPU seconds it used: user + system)."""
    env = dict(os.environ)
    for k in ("TAPEGRAD_INT8_ACTIVATIONS", "TAPEGRAD_INT8_PATH"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = "1"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = p.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({status}):\n{out[-2000:]}")
    return (out, usage.ru_utime + usage.ru_stime) if with_cpu else out


def decode_rate(out):
    m = re.search(r"decode: \d+ tokens in [0-9.]+ s \(([0-9.]+) tok/s", out)
    if m:
        return float(m.group(1))
    return float(re.search(r"achieved tok/s: ([0-9.]+)", out).group(1))  # runq.c


def token_file(path, vocab, n=1 << 15):
    ids = array.array("H" if vocab < 65536 else "I", random.Random(vocab).choices(range(vocab), k=n))
    with open(path, "wb") as f:
        f.write(b"TGTOKENS" + struct.pack("<IIQQ", 1, ids.itemsize, len(ids), vocab))
        ids.tofile(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=500, help="at most 507 (stories260K's context is 512)")
    ap.add_argument("--presets", default="micro,small,tiny")
    ap.add_argument("--custom", action="append", default=None, metavar="NAME=TRAIN_ARGS",
                    help="a model between the presets, e.g. 'd128L4=--model micro --d-model 128 --layers 4' (its "
                         "vocabulary: 512 if the args say micro, else 10000); default: d128L4 and d192L6; "
                         "--custom none for none")
    ap.add_argument("--before", default="", help="another tapegrad binary, run beside ours on the same models")
    a = ap.parse_args()
    tool = os.path.abspath(a.tool)
    llama = os.path.join(a.shared, "data/llama2c")
    corpus = os.path.join(a.shared, "data/corpora/tinystories_train_head2MiB.txt")
    runq_src = os.path.join(a.shared, "bench/peers/llama2c/runq.c")
    work = tempfile.mkdtemp(prefix="tapegrad_int8_sizes_")
    try:
        models = []  # (name, float checkpoint, tokenizer or None, llama2.c tokenizer or None)
        if os.path.exists(os.path.join(llama, "stories260K.bin")):
            run([tool, "import", "llama2c", f"{llama}/stories260K.bin", f"{llama}/tok512.bin", "--out",
                 f"{work}/s260k"])
            models.append(("stories260K", f"{work}/s260k/checkpoints/step_00000000.safetensors", None,
                           f"{llama}/tok512.bin"))
        tok_src = corpus if os.path.exists(corpus) else os.path.join(HERE, "..", "corpus", "tinystories_head.txt")
        tokenizers = {}
        customs = a.custom if a.custom is not None else ["d128L4=--model micro --d-model 128 --layers 4",
                                                         "d192L6=--model micro --d-model 192 --layers 6"]
        specs = [(c, ["--model", c]) for c in a.presets.split(",") if c]
        specs += [(c.split("=", 1)[0], c.split("=", 1)[1].split()) for c in customs if c != "none"]
        for cfg, train_args in specs:
            vocab = 512 if "micro" in train_args else 10000
            if vocab not in tokenizers:
                run([tool, "tokenize", "train", "--input", tok_src, "--vocab-size", str(vocab), "--threads", "1",
                     "--out", f"{work}/tok{vocab}"])
                token_file(f"{work}/ids{vocab}.bin", vocab)
                tokenizers[vocab] = f"{work}/tok{vocab}"
            run([tool, "train", *train_args, "--context", "512", "--train", f"{work}/ids{vocab}.bin", "--steps", "1",
                 "--batch-size", "1", "--threads", "1", "--out", f"{work}/{cfg}"])
            models.append((cfg, f"{work}/{cfg}/checkpoints/step_00000001.safetensors", tokenizers[vocab], None))

        runq = None
        if os.path.exists(runq_src) and shutil.which("gcc") and models and models[0][0] == "stories260K":
            shutil.copy(runq_src, f"{work}/runq.c")
            subprocess.run(["gcc", "-Ofast", "-march=native", "-o", f"{work}/runq", f"{work}/runq.c", "-lm"],
                           check=True)
            run([tool, "export", "llama2c", models[0][1], "--out", f"{work}/s260k_v2.bin", "--version", "2"])
            # -n counts positions: the prompt's 5 tokens (BOS included) and the new ones.
            runq = [f"{work}/runq", f"{work}/s260k_v2.bin", "-z", models[0][3], "-t", "0", "-n", "{n+5}",
                    "-i", "Once upon a time"]

        progs, info = [], {}
        for name, ck, tok, _ in models:
            out = run([tool, "info", "--checkpoint", ck])
            info[name] = int(re.search(r"parameters (\d+)", out).group(1))
            variants = {"f32": ck}
            for g in (64, 4):
                run([tool, "quantize", ck, "--out", f"{work}/{name}_g{g}", "--group", str(g)])
                variants[f"g{g}"] = f"{work}/{name}_g{g}/checkpoints/" + os.path.basename(ck)
            for v, path in variants.items():
                cmd = [tool, "generate", "--checkpoint", path, "--prompt", "Once upon a time", "--greedy", "--no-stop",
                       "--max-tokens", "{n}", "--threads", "1"]
                if tok:
                    cmd += ["--tokenizer", tok]
                progs.append((name, v, cmd))
                if a.before:
                    progs.append((name, v + " before", [os.path.abspath(a.before)] + cmd[1:]))
            if name == "stories260K" and runq:
                progs.append((name, "runq.c g4", runq))

        def with_n(cmd, n):
            return [x.replace("{n+5}", str(n + 5)).replace("{n}", str(n)) for x in cmd]

        raw = []
        for r in range(a.runs):
            for name, v, cmd in progs:
                out, cpu_long = run(with_n(cmd, a.tokens), with_cpu=True)
                _, cpu_short = run(with_n(cmd, 10), with_cpu=True)
                wall = decode_rate(out)
                cpu = (a.tokens - 10) / max(cpu_long - cpu_short, 1e-9)
                raw.append(dict(model=name, program=v, run=r + 1, tok_s=wall, cpu_tok_s=cpu))
                print(f"{name} {v} run {r + 1}: {cpu:.1f} tok/s from CPU time, {wall:.1f} decode tok/s", flush=True)

        def med(name, v, key="cpu_tok_s"):
            vals = [x[key] for x in raw if x["model"] == name and x["program"] == v]
            return statistics.median(vals) if vals else None

        rows = []
        for name, *_ in models:
            f32, g64, g4, rq = med(name, "f32"), med(name, "g64"), med(name, "g4"), med(name, "runq.c g4")
            rows.append(dict(model=name, params=info[name], f32=f32, int8=g64, int8_over_f32=g64 / f32, g4=g4,
                             g4_over_f32=g4 / f32, runq_g4=rq, before_f32=med(name, "f32 before"),
                             before_int8=med(name, "g64 before"), before_g4=med(name, "g4 before"),
                             wall=dict((v, med(name, v, "tok_s")) for v in ("f32", "g64", "g4", "runq.c g4"))))
        print(f"\nint8 generation, 1 thread, batch 1, greedy, {a.tokens} tokens; tok/s from CPU time, medians of "
              f"{a.runs} interleaved runs")
        print("| model | params | f32 tok/s | int8 tok/s (groups of 64) | int8/f32 | int8 g4 tok/s | g4/f32 "
              "| runq.c g4 |")
        print("|---|---|---|---|---|---|---|---|")
        for x in rows:
            rq = f"{x['runq_g4']:.0f}" if x["runq_g4"] else "–"
            print(f"| {x['model']} | {x['params'] / 1e6:.2f}M | {x['f32']:.0f} | {x['int8']:.0f} | "
                  f"{x['int8_over_f32']:.2f}× | {x['g4']:.0f} | {x['g4_over_f32']:.2f}× | {rq} |")
        print("\nthe same as decode tok/s printed by the programs (wall clock), medians")
        print("| model | f32 | int8 | int8/f32 | int8 g4 | g4/f32 | runq.c g4 |")
        print("|---|---|---|---|---|---|---|")
        for name, *_ in models:
            f, i, g, q = (med(name, v, "tok_s") for v in ("f32", "g64", "g4", "runq.c g4"))
            rq = f"{q:.0f}" if q else "–"
            print(f"| {name} | {f:.0f} | {i:.0f} | {i / f:.2f}× | {g:.0f} | {g / f:.2f}× | {rq} |")
        if a.before:
            print(f"\nfrom CPU time, side by side with --before {a.before}: tok/s before → now")
            print("| model | f32 | int8 (groups of 64) | int8 g4 |")
            print("|---|---|---|---|")
            for x in rows:
                print(f"| {x['model']} | {x['before_f32']:.0f} → {x['f32']:.0f} | "
                      f"{x['before_int8']:.0f} → {x['int8']:.0f} "
                      f"({x['int8'] / x['before_int8']:.2f}×) | {x['before_g4']:.0f} → {x['g4']:.0f} "
                      f"({x['g4'] / x['before_g4']:.2f}×) |")
        print("RESULT " + json.dumps(dict(kind="int8_sizes", threads=1, tokens=a.tokens, runs=a.runs, rows=rows,
                                          raw=raw)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

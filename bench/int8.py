"""int8.py -- int8 generation on the CPU (`bench/run.sh int8`): tapegrad's float32 and int8 decoding beside
PyTorch (float32 and quantize_dynamic int8, bench/torch_int8_generate.py) and llama2.c's runq.c (Q8_0, on our
own `export llama2c --version 2` of the same weights), batch 1, greedy, 256 tokens, medians over --runs
alternations. Also: file sizes, peak RSS of every process, and the bandwidth limit of each row
(bytes read per token / bench_large's 1-thread memcpy rate).

  python3 bench/int8.py --tool build/tools/tapegrad --large build/bench/bench_large --shared ../shared --runs 3
Prints the tables and one `RESULT {json}` line. Everything is written to a temp directory, deleted at the end.
"""
import argparse, json, os, re, shutil, statistics, struct, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = 256


def run(cmd, env_extra=None, threads=1):
    """Runs cmd; returns (stdout+stderr, peak RSS in MiB, wall seconds). Raises on failure."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TAPEGRAD_INT8_ACTIVATIONS", "TAPEGRAD_INT8_PATH"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = str(threads)
    env.update(env_extra or {})
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = p.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({status}):\n{out[-2000:]}")
    return out, usage.ru_maxrss / 1024.0, wall


def decode_rate(out):
    m = re.search(r"decode: (\d+) tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", out)
    if m:
        return float(m.group(2))
    m = re.search(r"achieved tok/s: ([0-9.]+)", out)
    if m:
        return float(m.group(1))
    m = re.search(r'RESULT (\{.*\})', out)
    return json.loads(m.group(1))["tok_s"]


def llama2c_tokenizer(path, vocab):
    """A llama2.c tokenizer.bin of `vocab` entries that runq.c accepts: <unk>, <s>, </s>, the 256 byte tokens, " ",
    fillers (only the speed is measured: the text is meaningless)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", 16))
        for i in range(vocab):
            # runq.c looks up " " (the dummy prefix of a prompt): it must be a token.
            s = ["<unk>", "<s>", "</s>"][i] if i < 3 else (f"<0x{i - 3:02X}>" if i < 259 else (" " if i == 259 else f"t{i}"))
            b = s.encode()
            f.write(struct.pack("<fi", 0.0, len(b)) + b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--large", default="")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--presets", default="small,tiny")
    ap.add_argument("--torch", default="", help="python with torch (default: /opt/torch2/bin/python, else python3)")
    a = ap.parse_args()
    tool = os.path.abspath(a.tool)
    corpus = os.path.join(a.shared, "data/corpora/tinystories_train_head2MiB.txt")
    runq_src = os.path.join(a.shared, "bench/peers/llama2c/runq.c")
    work = tempfile.mkdtemp(prefix="tapegrad_int8_bench_")
    try:
        torch_py = a.torch
        for cand in ([a.torch] if a.torch else []) + ["/opt/torch2/bin/python", sys.executable]:
            if cand and subprocess.run([cand, "-c", "import torch"], capture_output=True).returncode == 0:
                torch_py = cand
                break
        torch_ver = subprocess.run([torch_py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip() if torch_py else ""
        # The tokenizer (the checkpoints are trained on a token file, which has none) and random token ids.
        tok_src = corpus if os.path.exists(corpus) else os.path.join(HERE, "..", "corpus", "tinystories_head.txt")
        vocab = 10000 if os.path.exists(corpus) else 8000
        run([tool, "tokenize", "train", "--input", tok_src, "--vocab-size", str(vocab), "--threads", "1", "--out",
             f"{work}/tok"])
        import array, random
        ids = array.array("H", random.Random(vocab).choices(range(vocab), k=1 << 16))
        with open(f"{work}/random.bin", "wb") as f:
            f.write(b"TGTOKENS" + struct.pack("<IIQQ", 1, 2, len(ids), vocab))
            ids.tofile(f)
        bw = None
        if a.large and os.path.exists(a.large):
            out, _, _ = run([a.large, "--threads", "1", "--reps", "5", "--only", "mem"])
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    bw = json.loads(line[7:])["threads"]["1"]["copy_gbs"]
        runq = runq_omp = None
        if os.path.exists(runq_src) and shutil.which("gcc"):
            shutil.copy(runq_src, f"{work}/runq.c")
            subprocess.run(["gcc", "-Ofast", "-march=native", "-o", f"{work}/runq", f"{work}/runq.c", "-lm"], check=True)
            subprocess.run(["gcc", "-Ofast", "-march=native", "-fopenmp", "-o", f"{work}/runq_omp", f"{work}/runq.c",
                            "-lm"], check=True)
            runq, runq_omp = f"{work}/runq", f"{work}/runq_omp"
            llama2c_tokenizer(f"{work}/tok.bin", vocab)

        rows, raw = [], []
        for cfg in a.presets.split(","):
            ck_dir = f"{work}/ck_{cfg}"
            run([tool, "train", "--model", cfg, "--context", "256", "--train", f"{work}/random.bin", "--steps", "1",
                 "--batch-size", "1", "--threads", "1", "--out", ck_dir])
            ck = f"{ck_dir}/checkpoints/step_00000001.safetensors"
            qck = f"{work}/q_{cfg}/checkpoints/step_00000001.safetensors"
            qout, _, _ = run([tool, "quantize", ck, "--out", f"{work}/q_{cfg}", "--group", "64"])
            v2 = None
            if runq:
                try:
                    run([tool, "export", "llama2c", qck, "--out", f"{work}/{cfg}_v2.bin", "--version", "2", "--group", "64"])
                    v2 = f"{work}/{cfg}_v2.bin"
                except RuntimeError as e:
                    print(f"int8.py: no runq.c column for {cfg}: {e}", file=sys.stderr)
            info = run([tool, "info", "--checkpoint", ck])[0]
            params = int(re.search(r"parameters (\d+)", info).group(1))
            V = vocab
            C = int(re.search(r"d_model = (\d+)", info).group(1))
            read_f32 = 4 * (params - V * C)  # every weight once, one embedding row (ignored)
            qinfo = run([tool, "info", "--checkpoint", qck])[0]
            read_i8 = float(re.search(r"\): ([0-9.]+) MB", qinfo).group(1)) * 1e6 * (params - V * C) / params
            gen = ["generate", "--tokenizer", f"{work}/tok", "--prompt", "Once", "--greedy", "--no-stop",
                   "--max-tokens", str(GEN)]
            progs = {
                "ours f32": ([tool, *gen, "--checkpoint", ck, "--threads", "{t}"], {}),
                "ours int8": ([tool, *gen, "--checkpoint", qck, "--threads", "{t}"], {}),
                "ours int8 (float act.)": ([tool, *gen, "--checkpoint", qck, "--threads", "{t}"],
                                           {"TAPEGRAD_INT8_ACTIVATIONS": "float"}),
            }
            if torch_py:
                for mode in ("fp32", "qint8"):
                    progs[f"PyTorch {mode}"] = ([torch_py, os.path.join(HERE, "torch_int8_generate.py"), "--config",
                                                 cfg, "--tokens", str(GEN), "--threads", "{t}", "--modes", mode], {})
            if v2:
                progs["runq.c"] = ([runq, v2, "-z", f"{work}/tok.bin", "-t", "0", "-n", str(GEN), "-i", "a"], {})
            results = {}
            for r in range(a.runs):
                for threads in (1, 2):
                    for name, (cmd, env) in progs.items():
                        if threads == 2 and cfg != "tiny":
                            continue
                        c = [x.replace("{t}", str(threads)) for x in cmd]
                        if name == "runq.c" and threads == 2:
                            c[0] = runq_omp
                        out, rss, _ = run(c, env, threads)
                        tok_s = decode_rate(out)
                        results.setdefault((name, threads), []).append((tok_s, rss))
                        raw.append(dict(config=cfg, program=name, threads=threads, run=r + 1, tok_s=tok_s, rss_mib=rss))
                        print(f"{cfg} {name} {threads}T run {r + 1}: {tok_s:.1f} tok/s, peak RSS {rss:.0f} MiB",
                              flush=True)
            sizes = {"ours f32": os.path.getsize(ck), "ours int8": os.path.getsize(qck)}
            if v2:
                sizes["runq.c"] = os.path.getsize(v2)
            for (name, threads), vals in results.items():
                med = statistics.median(v[0] for v in vals)
                rss = statistics.median(v[1] for v in vals)
                int8 = "int8" in name or name == "runq.c" or "qint8" in name
                bytes_tok = read_i8 if int8 else read_f32
                limit = bw * 1e9 / bytes_tok if bw else None
                rows.append(dict(config=cfg, program=name, threads=threads, tok_s=med, rss_mib=rss,
                                 file_mb=sizes.get(name, sizes.get("ours int8" if "ours int8" in name else "", 0)) / 1e6,
                                 mb_per_token=bytes_tok / 1e6, bw_limit_tok_s=limit))
        print(f"\nint8 generation, batch 1, greedy, {GEN} tokens, medians of {a.runs} runs; PyTorch {torch_ver or '-'}; "
              f"1-thread memcpy {bw or '-'} GB/s")
        print("| config | program | threads | tok/s | vs ours f32 | vs PyTorch fp32 | MB read/token | bandwidth limit tok/s "
              "| file MB | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            base = next((x["tok_s"] for x in rows if x["config"] == row["config"] and x["program"] == "ours f32"
                         and x["threads"] == row["threads"]), None)
            pt = next((x["tok_s"] for x in rows if x["config"] == row["config"] and x["program"] == "PyTorch fp32"
                       and x["threads"] == row["threads"]), None)
            fmt = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
            print(f"| {row['config']} | {row['program']} | {row['threads']} | {row['tok_s']:.1f} | "
                  f"{fmt(base and row['tok_s'] / base)}× | {fmt(pt and row['tok_s'] / pt)}× | {row['mb_per_token']:.1f} | "
                  f"{fmt(row['bw_limit_tok_s'], 0)} | {fmt(row['file_mb'] or None, 1)} | {row['rss_mib']:.0f} |")
        print("RESULT " + json.dumps(dict(kind="int8_generate", memcpy_gb_s=bw, torch=torch_ver, rows=rows, raw=raw)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

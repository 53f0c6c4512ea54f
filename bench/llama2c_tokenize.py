"""llama2c_tokenize.py -- `tapegrad tokenize encode` with llama2.c's tokenizers (tok512.bin, the 32000-piece
tokenizer.bin) beside our byte-level BPE (tokenizer.json of 512 and 8192 tokens, trained here with
`tapegrad tokenize train` on 2 MiB of TinyStories, which allows no more than ~10k merges), all on the same
text. MB/s = input bytes / wall time of the whole process (start, tokenizer load, read, encode, write). The
rows run interleaved, one of each per round; the table quotes medians over the rounds. With --old-tool (a
tapegrad built before the fast encoder), the old llama2.c encoder runs beside the new one on a slice: the
first --old-kb KB of tinyshakespeare (short documents; the old loop is O(n^2) per document, the whole text
would take hours), and the two token files must be identical.

  python3 bench/llama2c_tokenize.py --tool build/tools/tapegrad --shared ../shared --rounds 5 \
      [--old-tool OLD/tapegrad] [--threads 1] [--mb 8]
Prints the table and one `RESULT {json}` line. Scratch files go to a temp directory, deleted at the end.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_host import cpu_model  # noqa: E402

CORPORA = ["tinystories_train_head2MiB.txt", "tinyshakespeare.txt", "tinystories_train_head4M_lowercase.txt"]


def run(cmd, threads):
    """Runs cmd; returns its wall time in seconds. Raises on failure."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout.decode()[-2000:]}")
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--old-tool", default="")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mb", type=float, default=8.0, help="text size: the corpora concatenated, cut to this")
    ap.add_argument("--old-kb", type=int, default=100, help="slice for the old encoder")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="tapegrad-l2c-tok-")
    try:
        corpora = os.path.join(a.shared, "data", "corpora")
        text = b"".join(open(os.path.join(corpora, c), "rb").read() for c in CORPORA)
        while len(text) < a.mb * 1e6:
            text += text
        text = text[: int(a.mb * 1e6)]
        text = text[: text.rfind(b"\n\n") + 2]  # whole documents
        big = os.path.join(work, "text.txt")
        open(big, "wb").write(text)
        # The old encoder's slice: the first --old-kb KB of tinyshakespeare (short documents: the old loop is O(n^2)
        # per document, and one 35 KB TinyStories document alone takes it half a minute).
        shakes = open(os.path.join(corpora, CORPORA[1]), "rb").read()
        cut = shakes.find(b"\n\n", a.old_kb * 1000)
        small_text = shakes if cut < 0 else shakes[: cut + 2]
        small = os.path.join(work, "slice.txt")
        open(small, "wb").write(small_text)

        l2c = os.path.join(a.shared, "data", "llama2c")
        toks = {"llama2c tok512.bin": os.path.join(l2c, "tok512.bin"),
                "llama2c tokenizer.bin (32000)": os.path.join(l2c, "tokenizer.bin")}
        bpe = {}
        for vocab in (512, 8192):
            out = os.path.join(work, f"bpe{vocab}")
            run([a.tool, "tokenize", "train", "--input", os.path.join(corpora, CORPORA[0]), "--vocab-size", str(vocab),
                 "--threads", "1", "--out", out], 1)
            bpe[f"BPE tokenizer.json ({vocab})"] = out

        # name -> (tool, tokenizer, input)
        rows = {}
        for name, path in list(toks.items()) + list(bpe.items()):
            rows[f"{name}, new"] = (a.tool, path, big)
        if a.old_tool:
            for name, path in toks.items():
                rows[f"{name}, new, shakespeare {len(small_text) / 1e3:.0f} KB"] = (a.tool, path, small)
                rows[f"{name}, old, shakespeare {len(small_text) / 1e3:.0f} KB"] = (a.old_tool, path, small)
        walls = {k: [] for k in rows}
        outs = {k: os.path.join(work, f"out{i}.bin") for i, k in enumerate(rows)}
        for r in range(a.rounds):
            for k, (tool, tok, inp) in rows.items():
                walls[k].append(run([tool, "tokenize", "encode", "--tokenizer", tok, "--input", inp, "--out", outs[k],
                                     "--threads", str(a.threads)], a.threads))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
        same = {}
        if a.old_tool:
            for name in toks:
                kb = f"shakespeare {len(small_text) / 1e3:.0f} KB"
                files = [open(outs[f"{name}, {v}, {kb}"], "rb").read() for v in ("new", "old")]
                same[name] = files[0] == files[1]

        size = {k: os.path.getsize(v[2]) for k, v in rows.items()}
        res = {}
        print(f"\n{'run':<52} {'bytes':>10} {'median s':>9} {'MB/s':>8}  (range)")
        for k in rows:
            med = statistics.median(walls[k])
            res[k] = {"bytes": size[k], "median_s": med, "mb_s": size[k] / med / 1e6,
                      "min_s": min(walls[k]), "max_s": max(walls[k])}
            print(f"{k:<52} {size[k]:>10} {med:>9.3f} {size[k] / med / 1e6:>8.3g}  "
                  f"({size[k] / max(walls[k]) / 1e6:.3g}-{size[k] / min(walls[k]) / 1e6:.3g})")
        ratios = {
            "tok512 new / BPE 512":
            res["llama2c tok512.bin, new"]["mb_s"] / res["BPE tokenizer.json (512), new"]["mb_s"],
            "tokenizer.bin new / BPE 8192": res["llama2c tokenizer.bin (32000), new"]["mb_s"]
            / res["BPE tokenizer.json (8192), new"]["mb_s"],
        }
        if a.old_tool:
            kb = f"shakespeare {len(small_text) / 1e3:.0f} KB"
            for name in toks:
                ratios[f"{name}: speed-up of new over old ({kb}, whole process)"] = (
                    res[f"{name}, old, {kb}"]["median_s"] / res[f"{name}, new, {kb}"]["median_s"])
        print()
        for k, v in ratios.items():
            print(f"{k}: {v:.2f}x")
        for k, v in same.items():
            print(f"{k}: old and new token files {'identical' if v else 'DIFFER'}")
        print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}, threads {a.threads}, "
              f"{a.rounds} rounds interleaved")
        print("RESULT " + json.dumps({"rows": res, "ratios": ratios, "old_new_identical": same, "cpu": cpu_model(),
                                      "loadavg": os.getloadavg(), "threads": a.threads, "rounds": a.rounds,
                                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))
        return 0 if all(same.values()) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

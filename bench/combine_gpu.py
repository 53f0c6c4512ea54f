"""combine_gpu.py -- issue 23's GPU table from the logs scripts/gpu_check.sh bf16 writes on one GPU machine (one
call or several on the same warm machine; pass every log, in any order):
  bench.log      bench_train RESULT lines (ours: --precision bf16 and --tf32 1), bench_decode RESULT lines, and
                 llm.c's step lines under the "== llm.c" / "== llm.c cudnn" markers ("step  12/40 | ... | 51.23 ms | ...")
  torch.log      torch_lm_modern.py RESULT lines (kind train: modes tf32/bf16/bf16c; kind generate: fp32/bf16)
  attention.log  bench_attention RESULT lines (kernel tc / simt) and bench/torch_attention.py's (SDPA backends)
Prints the training table (tokens/s per config, ours ÷ the fastest peer beside the target, peak GPU memory), the
decode line (ours beside PyTorch and the bandwidth limit) and the attention line (ours ÷ SDPA's best), then one
`RESULT {json}` line. Missing files or rows print as "-". Plain python3.

Usage: python3 bench/combine_gpu.py LOG [LOG ...]
"""
import json
import re
import statistics
import sys

from bench_host import result_lines

TARGETS = {"gpt2s": ("≥ 1.15× the faster of torch bf16c and llm.c; ≥ 450k tok/s", 1.15),
           "tiny": ("≥ 1.5× torch bf16c", 1.5), "tinyB64": ("≥ 1.1× torch bf16c", 1.1)}
LLMC_TOKENS = 16 * 1024  # llm.c runs gpt2s's shape: batch 16 × T 1024
STEP_RE = re.compile(r"^step\s+(\d+)/\d+ \|.*\| ([\d.]+) ms \|")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def results(lines):
    return result_lines("\n".join(lines))


def llmc_rates(lines):
    """tokens/s of each llm.c run: the median step time of steps after the 10th."""
    runs, current = {}, None
    for line in lines:
        if line.startswith("== llm.c"):
            m = re.match(r"== (llm\.c(?: cudnn)?) \(limit", line)
            current = m.group(1) if m else None
            continue
        m = STEP_RE.match(line)
        if current and m and int(m.group(1)) > 10:
            runs.setdefault(current, []).append(float(m.group(2)))
    return {k: LLMC_TOKENS / (statistics.median(v) / 1e3) for k, v in runs.items() if v}


def fmt(x, unit=""):
    return "-" if x is None else f"{x:,.0f}{unit}"


def main():
    lines = [line for path in sys.argv[1:] for line in read(path)]
    rs = [r for r in results(lines) if "fwd_bwd_tflops" not in r]
    ra = [r for r in results(lines) if "fwd_bwd_tflops" in r]
    ours, torch, decode, torch_gen = {}, {}, {}, {}
    for r in rs:
        if r.get("lib") == "tapegrad":
            key = "bf16" if r.get("precision") == "bf16" else ("tf32" if r.get("tf32") else "fp32")
            ours[(r["config"], key)] = r
        elif r.get("kind") == "train" and "tok_s" in r:
            torch[(r["config"], r["mode"])] = r
        elif r.get("kind") == "generate" and "tok_s" in r:
            torch_gen[r["mode"]] = r
        elif r.get("kind") == "decode" and r.get("impl") == "tapegrad":
            decode[r["precision"]] = r
    llmc = llmc_rates(lines)
    summary = {"train": {}, "decode": {}, "attention": {}}
    print("| config | ours bf16 | ours tf32 | torch bf16 | torch bf16c | llm.c | llm.c cuDNN | ours ÷ fastest peer | target "
          "| GPU peak MiB ours / torch bf16c |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cfg in ("tiny", "tinyB64", "gpt2s"):
        ob, ot = ours.get((cfg, "bf16")), ours.get((cfg, "tf32"))
        tb, tc = torch.get((cfg, "bf16")), torch.get((cfg, "bf16c"))
        peers = {"torch bf16c": tc["tok_s"] if tc else None}
        if cfg == "gpt2s":
            peers["llm.c"] = llmc.get("llm.c")
            peers["llm.c cuDNN"] = llmc.get("llm.c cudnn")
        present = {k: v for k, v in peers.items() if v}
        best_name, best = max(present.items(), key=lambda kv: kv[1]) if present else (None, None)
        ratio = ob["tokens_per_s"] / best if ob and best else None
        target_text, target = TARGETS[cfg]
        mem_ours = ob.get("gpu_peak_allocated_mib") if ob else None
        mem_torch = tc["peak_mem_gib"] * 1024 if tc and "peak_mem_gib" in tc else None
        print(f"| {cfg} | {fmt(ob and ob['tokens_per_s'])} | {fmt(ot and ot['tokens_per_s'])} | {fmt(tb and tb['tok_s'])} "
              f"| {fmt(tc and tc['tok_s'])} | {fmt(peers.get('llm.c'))} | {fmt(peers.get('llm.c cuDNN'))} "
              f"| {'-' if ratio is None else f'{ratio:.2f}× ({best_name})'} | {target_text} "
              f"| {fmt(mem_ours)} / {fmt(mem_torch)} |")
        summary["train"][cfg] = {"ours_bf16": ob and ob["tokens_per_s"], "ours_tf32": ot and ot["tokens_per_s"],
                                 "torch_bf16": tb and tb["tok_s"], "torch_bf16c": tc and tc["tok_s"],
                                 "llmc": peers.get("llm.c"), "llmc_cudnn": peers.get("llm.c cuDNN"),
                                 "ratio_vs_fastest_peer": ratio, "target_ratio": target,
                                 "met": None if ratio is None else ratio >= target,
                                 "gpu_peak_mib_ours": mem_ours, "gpu_peak_mib_torch_bf16c": mem_torch}
    d = decode.get("bf16")
    tg = torch_gen.get("bf16")
    print()
    print(f"decode gpt2s bf16, batch 1, 256 new tokens: ours {fmt(d and d['decode_tok_s'])} tok/s, limit "
          f"{fmt(d and d['limit_tok_s'])} tok/s ({fmt(d and d['copy_gbs'])} GB/s ÷ {d and d['weight_mb_per_token']} MB per "
          f"token), PyTorch bf16 with a KV cache {fmt(tg and tg['tok_s'])} tok/s; target ≥ 5,000")
    if d and "sampled_top_k_tok_s" in d:
        print(f"  sampled on the device: top-k 50 {fmt(d['sampled_top_k_tok_s'])} tok/s, top-p 0.95 "
              f"{fmt(d['sampled_top_p_tok_s'])} tok/s (untrained model: near-flat logits, the sampler's worst case)")
    summary["decode"] = {"ours_bf16": d and d["decode_tok_s"], "limit": d and d["limit_tok_s"],
                         "torch_bf16": tg and tg["tok_s"], "met": None if not d else d["decode_tok_s"] >= 5000,
                         "sampled_top_k": d and d.get("sampled_top_k_tok_s"),
                         "sampled_top_p": d and d.get("sampled_top_p_tok_s")}
    print()
    print("| attention shape | ours tc f+b TFLOP/s | ours simt | SDPA flash | SDPA cudnn | SDPA efficient | ours ÷ best SDPA |")
    print("|---|---|---|---|---|---|---|")
    for shape in ("tiny", "tinyB64", "gpt2s"):
        row = {}
        for r in ra:
            if r.get("shape") != shape:
                continue
            key = r.get("kernel") if r.get("impl") == "tapegrad" else r.get("backend")
            row[key] = r.get("fwd_bwd_tflops")
        sdpa = [row.get(k) for k in ("flash", "cudnn", "efficient") if row.get(k)]
        best = max(sdpa) if sdpa else None
        ours_tc = row.get("tc")
        ratio = ours_tc / best if ours_tc and best else None
        f2 = lambda x: "-" if x is None else f"{x:.1f}"
        print(f"| {shape} | {f2(ours_tc)} | {f2(row.get('simt'))} | {f2(row.get('flash'))} | {f2(row.get('cudnn'))} "
              f"| {f2(row.get('efficient'))} | {'-' if ratio is None else f'{ratio:.2f} (target ≥ 0.70)'} |")
        summary["attention"][shape] = {"ours_tc": ours_tc, "ours_simt": row.get("simt"), "sdpa_best": best,
                                       "ratio": ratio}
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    main()

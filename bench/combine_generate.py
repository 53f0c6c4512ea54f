"""combine_generate.py -- used by `bench/run.sh generate`: text generation at batch 1, from the raw files of one run
directory (each program's stdout + stderr):
  gen_s260_ours_<threads>_<run>.txt      `tapegrad generate` on stories260K ("prefill: P tokens in X ms (R tok/s);
                                         decode: M tokens in S s (D tok/s)")
  gen_s260_run_<threads>_<run>.txt       llama2.c run.c, gcc -O3 (-fopenmp past 1 thread): "achieved tok/s: X"
  gen_s260_runfast_<threads>_<run>.txt   the same, gcc -Ofast -march=native
  gen_bw.txt                             bench_large --only mem --threads 1 (its RESULT line: copy_gbs, sum_all)
  gen_info_<preset>.txt                  `tapegrad info` of the random-weight checkpoint (parameters, config)
  gen_lm_ours_<preset>_1_<run>.txt       `tapegrad generate` on it, greedy, --no-stop
  gen_lm_torch2_<preset>_1_<run>.txt     shared/bench/torch_lm_modern.py --gen 256 (RESULT kind "generate")
  gen_prefill_ours_1_<run>.txt           `tapegrad generate --prompt-file ... --sliding --max-tokens 1` (tiny)
  gen_prefill_train_1_<run>.txt          bench_train --config tiny (its RESULT: tokens_per_step, fwd_s_median)
Prints the tables (medians over the runs) and ends with exactly one line `RESULT {json}`. Plain python3.

Usage: python3 bench/combine_generate.py RUN_DIR
"""
import glob
import json
import os
import re
import statistics
import sys
import time

from bench_host import cpu_model, openblas_coretype, result_lines

run_dir = sys.argv[1]

OURS_RE = re.compile(r"^prefill: (\d+) tokens in ([\d.]+) ms \(([\d.]+) tok/s\); "
                     r"decode: (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def results(text):
    return result_lines(text)


def ours(text):
    """{prompt_tokens, prefill_ms, prefill_tok_s, decode_tokens, decode_s, decode_tok_s} or None."""
    for line in text.splitlines():
        m = OURS_RE.match(line)
        if m:
            d = dict(prompt_tokens=int(m.group(1)), prefill_ms=float(m.group(2)), prefill_tok_s=float(m.group(3)),
                     decode_tokens=int(m.group(4)), decode_s=float(m.group(5)), decode_tok_s=float(m.group(6)))
            # The printed rates are rounded (prefill to whole tok/s): recompute from the printed counts and times.
            if d["prefill_ms"] > 0:
                d["prefill_tok_s"] = d["prompt_tokens"] / (d["prefill_ms"] / 1e3)
            return d
    return None


def runc(text):
    m = re.search(r"achieved tok/s: ([\d.]+)", text)
    return float(m.group(1)) if m else None


def runs_of(pattern):
    """{key: [paths sorted by run]} for files gen_<pattern> whose last two fields are <threads>_<run>."""
    out = {}
    for path in sorted(glob.glob(os.path.join(run_dir, pattern))):
        m = re.search(r"_(\d+)_(\d+)\.txt$", path)
        if m:
            out.setdefault(int(m.group(1)), []).append(path)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, spec):
    return "-" if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


report = dict(mode="generate", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

# ---- (1) stories260K ----
s260 = []
ours_runs = runs_of("gen_s260_ours_*_*.txt")
if ours_runs:
    print("### stories260K (llama2.c), batch 1, greedy, prompt \"Once upon a time\", 200 positions")
    print()
    print("| threads | ours decode tok/s | ours prefill tok/s | run.c -O3 tok/s | run.c -Ofast -march=native tok/s "
          "| ours / run.c -O3 | ours / run.c -Ofast | runs |")
    print("|---|---|---|---|---|---|---|---|")
    threads = sorted(set(ours_runs) | set(runs_of("gen_s260_run_*_*.txt")))
    for t in threads:
        o = [ours(read(p)) for p in ours_runs.get(t, [])]
        o = [x for x in o if x]
        rc = [runc(read(p)) for p in runs_of("gen_s260_run_*_*.txt").get(t, [])]
        rf = [runc(read(p)) for p in runs_of("gen_s260_runfast_*_*.txt").get(t, [])]
        dec, pre = med([x["decode_tok_s"] for x in o]), med([x["prefill_tok_s"] for x in o])
        mrc, mrf = med(rc), med(rf)
        n = f"{len(o)}/{len([x for x in rc if x])}/{len([x for x in rf if x])}"
        print(f"| {t} | {f(dec, ',.0f')} | {f(pre, ',.0f')} | {f(mrc, ',.0f')} | {f(mrf, ',.0f')} "
              f"| {f(ratio(dec, mrc), '.2f')}× | {f(ratio(dec, mrf), '.2f')}× | {n} |")
        s260.append(dict(threads=t, ours_decode_tok_s=dec, ours_prefill_tok_s=pre, runc_O3_tok_s=mrc,
                         runc_Ofast_native_tok_s=mrf, ours_over_runc_O3=ratio(dec, mrc),
                         ours_over_runc_Ofast=ratio(dec, mrf),
                         prompt_tokens=o[0]["prompt_tokens"] if o else None,
                         decode_tokens=o[0]["decode_tokens"] if o else None,
                         runs_ours_decode=[x["decode_tok_s"] for x in o],
                         runs_ours_prefill=[x["prefill_tok_s"] for x in o], runs_runc_O3=rc, runs_runc_Ofast=rf))
    p = s260[0]["prompt_tokens"] if s260 else None
    d = s260[0]["decode_tokens"] if s260 else None
    print(f"(medians over the runs, listed ours/run.c -O3/run.c -Ofast. Ours: `tapegrad generate --greedy "
          f"--max-tokens 196`; the prompt is {p if p else '?'} tokens (BOS included), read in one prefill forward "
          f"(its rate in the second column); the decode rate is {d if d is not None else '?'} single-token forwards "
          f"through the KV cache, each with its greedy pick and the printing of its text, over their wall time. "
          f"run.c (`-t 0.0 -n 200`) has no batched prefill: it runs one forward per position, prompt positions "
          f"included, and its 'achieved tok/s' is (pos − 1) / (wall time from the end of the first forward to the "
          f"end), i.e. 199 forwards (the prompt's positions 1..P−1 and every generated token's) over a "
          f"millisecond clock; it stops early at the BOS token, and so does ours at the end-of-text token. So "
          f"run.c's figure is a per-position rate of single-token forwards, prompt positions included; ours is "
          f"the decode rate alone (the P − 1 prompt forwards it folds in are {(p - 1) if p else '?'} of its 199). Past 1 thread run.c is "
          f"built with -fopenmp and run with OMP_NUM_THREADS=N; this 260K-parameter model is far too small for "
          f"a second thread to pay.)")
    print()
report["stories260K"] = s260

# ---- (2) small / tiny ----
bw = None
for r in results(read(os.path.join(run_dir, "gen_bw.txt"))):
    t1 = (r.get("threads") or {}).get("1")
    if t1:
        bw = dict(copy_gbs=t1.get("copy_gbs"), sum_all_gbs=((t1.get("ops") or {}).get("sum_all") or {}).get("gbs"))


def info(cfg):
    text = read(os.path.join(run_dir, f"gen_info_{cfg}.txt"))
    d = {}
    m = re.search(r"parameters (\d+)", text)
    if m:
        d["parameters"] = int(m.group(1))
    for k in ("context_length", "vocab_size", "d_model", "n_layers", "tie_embeddings"):
        m = re.search(rf"^\s*{k} = (\S+)", text, re.M)
        if m:
            d[k] = m.group(1)
    return d


lm_rows = []
presets = [c for c in ("small", "tiny") if glob.glob(os.path.join(run_dir, f"gen_lm_ours_{c}_1_*.txt"))]
torch_version = None
if presets:
    print("### small / tiny presets, random weights, batch 1, greedy, 1 thread")
    print()
    print("| preset | parameters | weights read per token | ours: decode forwards | ours decode tok/s "
          "| PyTorch 2 tok/s (256 forwards) | ours / PyTorch | bandwidth bound tok/s | ours % of bound | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cfg in presets:
        inf = info(cfg)
        o = [ours(read(p)) for p in sorted(glob.glob(os.path.join(run_dir, f"gen_lm_ours_{cfg}_1_*.txt")))]
        o = [x for x in o if x]
        tt = []
        for p in sorted(glob.glob(os.path.join(run_dir, f"gen_lm_torch2_{cfg}_1_*.txt"))):
            text = read(p)
            v = re.search(r"^(\d+\.\d+\S*) cpu$", text, re.M)
            torch_version = torch_version or (v.group(1) if v else None)
            tt += [r["tok_s"] for r in results(text) if r.get("kind") == "generate" and r.get("tok_s")]
        dec, mt = med([x["decode_tok_s"] for x in o]), med(tt)
        n_par = inf.get("parameters")
        weights = None
        if n_par:
            # Every weight is read once per token except the embedding table, of which one row is read (when it
            # is not tied to the LM head, which reads it all).
            emb = 0 if inf.get("tie_embeddings") == "true" else int(inf.get("vocab_size", 0)) * int(inf.get("d_model", 0))
            weights = n_par - emb
        bytes_tok = 4 * weights if weights else None
        bound = bw["copy_gbs"] * 1e9 / bytes_tok if bw and bw.get("copy_gbs") and bytes_tok else None
        bound_read = bw["sum_all_gbs"] * 1e9 / bytes_tok if bw and bw.get("sum_all_gbs") and bytes_tok else None
        nd = o[0]["decode_tokens"] if o else None
        print(f"| {cfg} (context {inf.get('context_length', '?')}) | {f(n_par, ',')} | "
              f"{f(None if bytes_tok is None else bytes_tok / 1e6, '.1f')} MB | {f(nd, 'd')} | {f(dec, ',.0f')} | "
              f"{f(mt, ',.0f')} | {f(ratio(dec, mt), '.2f')}× | {f(bound, ',.0f')} | "
              f"{f(None if ratio(dec, bound) is None else 100 * ratio(dec, bound), '.0f')} % | {len(o)}/{len(tt)} |")
        lm_rows.append(dict(preset=cfg, context=inf.get("context_length"), parameters=n_par,
                            weights_read_per_token=weights, bytes_per_token=bytes_tok,
                            prompt_tokens=o[0]["prompt_tokens"] if o else None, decode_forwards=nd,
                            ours_decode_tok_s=dec, torch2_tok_s=mt, ours_over_torch2=ratio(dec, mt),
                            bound_copy_tok_s=bound, bound_read_tok_s=bound_read, ours_over_bound=ratio(dec, bound),
                            runs_ours=[x["decode_tok_s"] for x in o], runs_torch2=tt))
    bw_txt = (f"memcpy {bw['copy_gbs']:.1f} GB/s (bytes read + written), read-only sum_all "
              f"{bw['sum_all_gbs']:.1f} GB/s" if bw and bw.get("copy_gbs") and bw.get("sum_all_gbs") else "not measured")
    print(f"(medians over the runs, listed ours/PyTorch. Both models are randomly initialised (ours: one training "
          f"step on random tokens); greedy, so the ids drawn differ but the work per token does not. small runs "
          f"with context 256 instead of its preset's 128, like PyTorch's --gen 256 (torch_lm_modern.py uses "
          f"context max(preset, 256)); same weights either way. Ours: `tapegrad generate --prompt Once --greedy "
          f"--no-stop --max-tokens M`, M = min(256, context − P + 1) for a P-token prompt; the rate is the decode "
          f"forwards (M − 1, at positions P..P+M−2) over their wall time, the prefill of the prompt excluded. "
          f"PyTorch 2 (torch {torch_version or 'not run'}, fp32, eager, SDPA, KV cache): 256 single-token forwards "
          f"at positions 0..255 starting from id 0, timed as a whole after one untimed pass. Bandwidth bound: a "
          f"decoder that only streams its weights from memory once per token: 4 bytes × the weights read per "
          f"token (every parameter but the embedding table, of which one row is read; the KV cache, < 3 % here, "
          f"left out) ÷ bench_large's 1-thread {bw_txt}; the read-only rate gives a bound "
          f"{'/'.join(f(r['bound_read_tok_s'], ',.0f') for r in lm_rows)} tok/s. A model whose weights fit in "
          f"the last-level cache can beat this bound.)")
    print()
report["memory_bandwidth_1_thread"] = bw
report["presets"] = lm_rows
report["torch2_version"] = torch_version

# ---- (3) prefill vs the training forward ----
pre = [ours(read(p)) for p in sorted(glob.glob(os.path.join(run_dir, "gen_prefill_ours_1_*.txt")))]
pre = [x for x in pre if x]
fwd = []
for p in sorted(glob.glob(os.path.join(run_dir, "gen_prefill_train_1_*.txt"))):
    for r in results(read(p)):
        if r.get("fwd_s_median") and r.get("tokens_per_step"):
            fwd.append(dict(tok_s=r["tokens_per_step"] / r["fwd_s_median"], tokens=r["tokens_per_step"],
                            fwd_ms=r["fwd_s_median"] * 1e3))
prefill = None
if pre or fwd:
    mp, mf = med([x["prefill_tok_s"] for x in pre]), med([x["tok_s"] for x in fwd])
    pt = pre[0]["prompt_tokens"] if pre else None
    print("### prefill vs the training forward, tiny, 1 thread")
    print()
    print("| | tokens per forward | tok/s | runs |")
    print("|---|---|---|---|")
    print(f"| `tapegrad generate` prefill (batch 1, no grad, KV cache filled) | {f(pt, 'd')} | {f(mp, ',.0f')} "
          f"| {len(pre)} |")
    print(f"| bench_train forward + cross-entropy (batch 8 × 256, recording the tape) | "
          f"{f(fwd[0]['tokens'] if fwd else None, 'd')} | {f(mf, ',.0f')} | {len(fwd)} |")
    print(f"| prefill / training forward | | {f(ratio(mp, mf), '.2f')}× | |")
    print(f"(the prompt is the first 8 KiB of tinystories_train_head2MiB.txt, cut by sliding to its last "
          f"{pt if pt else '?'} tokens (the context), the count `generate` prints; the rate is that over the printed "
          f"prefill time (the forward + picking the first token, 0.1 ms resolution). bench_train's: B·T / its median "
          f"'fwd+loss' time (the forward under autograd and the loss), "
          f"{f(fwd[0]['fwd_ms'] if fwd else None, '.0f')} ms in the first run.)")
    print()
    prefill = dict(prompt_tokens=pt, ours_prefill_tok_s=mp, train_forward_tok_s=mf, prefill_over_train_fwd=ratio(mp, mf),
                   runs_prefill=[x["prefill_tok_s"] for x in pre], runs_train_fwd=[x["tok_s"] for x in fwd])
report["prefill_tiny"] = prefill

cpu = cpu_model()
coretype = openblas_coretype()
print(f"CPU: {cpu} ({os.cpu_count()} CPUs) | OPENBLAS_CORETYPE={coretype or '<unset>'} | "
      f"load average at the end {os.getloadavg()[0]:.2f}")
report.update(cpu=cpu, nproc=os.cpu_count(), openblas_coretype_env=coretype, loadavg_1min_at_end=os.getloadavg()[0])
print("RESULT " + json.dumps(report))

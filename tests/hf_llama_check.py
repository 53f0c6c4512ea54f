#!/usr/bin/env python3
"""hf_llama_check.py TOOL WORKDIR — `tapegrad export hf` loads in Hugging Face transformers and computes our losses.

For two micro models (GQA with a separate LM head; MHA with tied embeddings), trained 2 steps on random tokens:
  tapegrad train → tapegrad export hf → transformers.LlamaForCausalLM.from_pretrained(dir) in float32,
then the mean cross-entropy of transformers' logits over the windows 0, T, 2T, … of a fixed token file must
equal `tapegrad eval --data` on the same file (≤ 1e-4 relative; our loss is read back as ln(perplexity),
which is printed with more digits). A control: the same HF model with q_proj/k_proj rows NOT permuted
(our interleaved layout) gives a different loss, so the comparison can see a wrong RoPE layout.
In bf16: a model trained with --precision bf16 and exported with --dtype bfloat16 has only BF16 tensors and
torch_dtype bfloat16; transformers (weights widened to float32) matches `tapegrad import hf` + eval of the same
file (≤ 1e-4), and transformers computing in bfloat16 matches `tapegrad eval --precision bf16` (≤ 2e-2).
Exit 77 (ctest: skipped) when torch or transformers cannot be imported.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch
    import transformers
except Exception as e:  # noqa: BLE001 — any import failure means: not available here
    print(f"SKIP: torch/transformers not importable: {e}")
    sys.exit(77)

TOOL, WORK = sys.argv[1], sys.argv[2]
VOCAB, CONTEXT = 512, 64  # the micro preset's


def write_tokens(path, ids, vocab):
    with open(path, "wb") as f:
        f.write(b"TGTOKENS" + struct.pack("<IIQQ", 1, 2, len(ids), vocab))
        f.write(np.asarray(ids, dtype="<u2").tobytes())


def run(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: tapegrad {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def hf_loss(model, ids, T):
    windows = (len(ids) - 1) // T
    x = torch.tensor([ids[w * T:w * T + T] for w in range(windows)], dtype=torch.long)
    y = torch.tensor([ids[w * T + 1:w * T + T + 1] for w in range(windows)], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=x).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item(), windows * T


def load_hf(path, dtype=torch.float32):
    kw = {"attn_implementation": "eager"}
    try:
        return transformers.LlamaForCausalLM.from_pretrained(path, dtype=dtype, **kw).eval()
    except TypeError:
        return transformers.LlamaForCausalLM.from_pretrained(path, torch_dtype=dtype, **kw).eval()


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    rng = np.random.default_rng(1234)
    train = os.path.join(WORK, "train.bin")
    write_tokens(train, rng.integers(0, VOCAB, 20000).tolist(), VOCAB)
    eval_ids = rng.integers(0, VOCAB, 6 * CONTEXT + 1).tolist()
    evalf = os.path.join(WORK, "eval.bin")
    write_tokens(evalf, eval_ids, VOCAB)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")

    worst = 0.0
    for name, extra in [("gqa_untied", ["--kv-heads", "2", "--tie-embeddings", "false"]),
                        ("mha_tied", ["--tie-embeddings", "true"])]:
        out = os.path.join(WORK, name)
        run("train", "--train", train, "--model", "micro", "--steps", "2", "--batch-size", "4", "--lr", "3e-2",
            "--warmup-steps", "0", "--threads", "1", "--out", out, *extra)
        ckpts = sorted(os.listdir(os.path.join(out, "checkpoints")))
        ckpt = os.path.join(out, "checkpoints", [c for c in ckpts if c.startswith("step_")][-1])
        hf_dir = os.path.join(WORK, name + "_hf")
        run("export", "hf", ckpt, "--out", hf_dir)
        text = run("eval", "--checkpoint", ckpt, "--data", evalf, "--batch-size", "3", "--threads", "1")
        m = re.search(r"loss ([0-9.]+) nats/token  perplexity ([0-9.]+)  tokens evaluated ([0-9]+)", text)
        if not m:
            sys.exit(f"FAIL: cannot parse tapegrad eval output:\n{text}")
        ours_printed, ours, tokens = float(m.group(1)), math.log(float(m.group(2))), int(m.group(3))

        model = load_hf(hf_dir)
        theirs, hf_tokens = hf_loss(model, eval_ids, CONTEXT)
        rel = abs(theirs - ours) / abs(ours)
        worst = max(worst, rel)
        # The control: undo the rotate-half permutation (rows back to our interleaved layout).
        D = model.config.hidden_size // model.config.num_attention_heads
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                    w = proj.weight.data
                    heads = w.shape[0] // D
                    # HF row h·D + j·D/2 + k ← our row h·D + 2k + j: view [H, 2, D/2, C] → [H, D/2, 2, C].
                    proj.weight.data = w.reshape(heads, 2, D // 2, -1).transpose(1, 2).reshape(w.shape).contiguous()
        unpermuted, _ = hf_loss(model, eval_ids, CONTEXT)
        print(f"{name}: tapegrad eval loss {ours:.7f} (printed {ours_printed:.4f}, {tokens} tokens)  "
              f"transformers {theirs:.7f} ({hf_tokens} tokens)  relative difference {rel:.2e}  "
              f"[control, q/k rows not permuted: {unpermuted:.7f}]")
        if tokens != hf_tokens:
            sys.exit(f"FAIL: {name}: tapegrad evaluated {tokens} tokens, transformers {hf_tokens}")
        if rel > 1e-4:
            sys.exit(f"FAIL: {name}: losses differ by {rel:.2e} relative (> 1e-4)")
        if abs(unpermuted - ours) / ours <= 10 * max(rel, 1e-7):
            sys.exit(f"FAIL: {name}: the control (unpermuted q/k) is as close as the export: the check cannot see RoPE")
    worst = max(worst, check_bf16(train, evalf, eval_ids))
    print(f"OK: transformers' LlamaForCausalLM matches tapegrad (worst relative difference {worst:.2e})")


def eval_loss(*args):
    text = run("eval", *args, "--batch-size", "3", "--threads", "1")
    m = re.search(r"perplexity ([0-9.]+)", text)
    if not m:
        sys.exit(f"FAIL: cannot parse tapegrad eval output:\n{text}")
    return math.log(float(m.group(1)))


def check_bf16(train, evalf, eval_ids):
    out, hf_dir, imported = (os.path.join(WORK, n) for n in ("bf16", "bf16_hf", "bf16_imported"))
    run("train", "--train", train, "--model", "micro", "--steps", "2", "--batch-size", "4", "--lr", "3e-2",
        "--warmup-steps", "0", "--threads", "1", "--precision", "bf16", "--kv-heads", "2", "--tie-embeddings", "false",
        "--out", out)
    run("export", "hf", out, "--out", hf_dir, "--dtype", "bfloat16")
    with open(os.path.join(hf_dir, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    with open(os.path.join(hf_dir, "config.json")) as f:
        torch_dtype = json.load(f)["torch_dtype"]
    if dtypes != {"BF16"} or torch_dtype != "bfloat16":
        sys.exit(f"FAIL: bf16 export: tensor dtypes {dtypes}, torch_dtype {torch_dtype}")
    run("import", "hf", hf_dir, "--out", imported)
    ours = eval_loss("--checkpoint", imported, "--data", evalf)
    theirs, _ = hf_loss(load_hf(hf_dir), eval_ids, CONTEXT)
    rel = abs(theirs - ours) / abs(ours)
    ours16 = eval_loss("--checkpoint", imported, "--data", evalf, "--precision", "bf16")
    theirs16, _ = hf_loss(load_hf(hf_dir, torch.bfloat16), eval_ids, CONTEXT)
    rel16 = abs(theirs16 - ours16) / abs(ours16)
    print(f"bf16 export: tapegrad {ours:.7f}  transformers {theirs:.7f}  relative difference {rel:.2e};  "
          f"computing in bf16: tapegrad {ours16:.5f}  transformers {theirs16:.5f}  relative difference {rel16:.2e}")
    if rel > 1e-4:
        sys.exit(f"FAIL: bf16 export: losses differ by {rel:.2e} relative (> 1e-4)")
    if rel16 > 2e-2:
        sys.exit(f"FAIL: bf16 export computed in bf16: losses differ by {rel16:.2e} relative (> 2e-2)")
    return rel


main()

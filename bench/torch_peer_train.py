"""torch_peer_train.py — tapegrad's TransformerLM trained in PyTorch 2.x, the peer of `tapegrad train` in
bench/main_job_race.py (issue 34 §5: the main job's setup with each recipe, PyTorch beside tapegrad).

The same model as nn/transformer_lm.h (token embedding → L pre-norm blocks: RMSNorm, causal attention with RoPE on
interleaved pairs (2k, 2k+1) and optional QK-norm, RMSNorm, SwiGLU → RMSNorm → untied or tied head), the same
initialisation (Linear: normal σ = √(2/(in+out)) truncated at ±3σ; embedding N(0, 1) truncated at ±3, or σ = 1/√C
when tied; gains at 1), the same data (tapegrad's token files, random windows of T+1 tokens), the same optimizers
(AdamW with weight decay on matrices only and β, ε, clipping as tapegrad's; or torch.optim.Muon for the blocks'
matrices and AdamW for the rest, Muon's lr moved in proportion to AdamW's by the schedule) and schedules (CS336's
cosine; warmup–stable–decay), and the same evaluation (every window at 0, T, 2T, … of the validation file).

    python3 bench/torch_peer_train.py --train train.bin --val val.bin --steps 800 --batch-size 16 --context 128 \\
        --d-model 128 --layers 4 --heads 4 --lr 3e-3 --warmup-steps 50 --eval-every 100 [--recipe modern]

Prints one line per evaluation and a last line `RESULT {json}` with the curve: step, training seconds (the
evaluations excluded), validation loss.
"""
import argparse, json, math, struct, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_tokens(path):
    with open(path, "rb") as f:
        head = f.read(32)
        assert head[:8] == b"TGTOKENS", f"{path}: not a tapegrad token file"
        _, width, count, vocab = struct.unpack("<IIQQ", head[8:32])
        data = np.frombuffer(f.read(), dtype=np.uint16 if width == 2 else np.uint32, count=count)
    return torch.from_numpy(data.astype(np.int64)), vocab


def trunc_normal_(w, std):
    nn.init.trunc_normal_(w, 0.0, std, -3 * std, 3 * std)


def linear(i, o):
    lin = nn.Linear(i, o, bias=False)
    trunc_normal_(lin.weight, math.sqrt(2.0 / (i + o)))
    return lin


class RMSNorm(nn.Module):
    def __init__(s, d, eps=1e-5):
        super().__init__()
        s.weight, s.eps = nn.Parameter(torch.ones(d)), eps

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight


def rope(x, cos, sin):  # x [B, H, T, D]; pairs (2k, 2k+1) rotated by angle pos·θ^(−2k/D)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(s, c, h, ff, qk_norm):
        super().__init__()
        s.h, s.d = h, c // h
        s.ln1, s.ln2 = RMSNorm(c), RMSNorm(c)
        s.q_proj, s.k_proj, s.v_proj, s.output_proj = linear(c, c), linear(c, c), linear(c, c), linear(c, c)
        s.q_norm, s.k_norm = (RMSNorm(s.d), RMSNorm(s.d)) if qk_norm else (None, None)
        s.w1, s.w2, s.w3 = linear(c, ff), linear(ff, c), linear(c, ff)

    def forward(s, x, cos, sin):
        B, T, C = x.shape
        a = s.ln1(x)
        q, k, v = (p(a).view(B, T, s.h, s.d) for p in (s.q_proj, s.k_proj, s.v_proj))
        if s.q_norm is not None:
            q, k = s.q_norm(q), s.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(rope(q, cos, sin), rope(k, cos, sin), v, is_causal=True)
        x = x + s.output_proj(y.transpose(1, 2).reshape(B, T, C))
        f = s.ln2(x)
        return x + s.w2(F.silu(s.w1(f)) * s.w3(f))


class LM(nn.Module):
    def __init__(s, v, t, c, layers, h, tie, qk_norm):
        super().__init__()
        ff = (8 * c + 2) // 3
        ff = (ff + 63) // 64 * 64  # tapegrad's SwiGLU default
        s.emb = nn.Embedding(v, c)
        trunc_normal_(s.emb.weight, 1.0 / math.sqrt(c) if tie else 1.0)
        s.blocks = nn.ModuleList(Block(c, h, ff, qk_norm) for _ in range(layers))
        s.ln_final = RMSNorm(c)
        s.head = None if tie else linear(c, v)
        d = c // h
        inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        s.register_buffer("cos", ang.cos().float(), persistent=False)
        s.register_buffer("sin", ang.sin().float(), persistent=False)

    def forward(s, ids):
        T = ids.shape[1]
        x = s.emb(ids)
        for b in s.blocks:
            x = b(x, s.cos[:T], s.sin[:T])
        x = s.ln_final(x)
        return x @ s.emb.weight.t() if s.head is None else s.head(x)


def lr_at(t, a):  # tapegrad's optim/lr_schedule.h
    if t < a.warmup_steps:
        return t / a.warmup_steps * a.lr
    if a.schedule == "wsd":
        d = min(a.steps, max(1, round(a.decay_fraction * a.steps)))
        if t < a.steps - d:
            return a.lr
        return a.min_lr if t >= a.steps else a.lr - (a.lr - a.min_lr) * (t - (a.steps - d)) / d
    if t > a.steps:
        return a.min_lr
    return a.min_lr + 0.5 * (1 + math.cos(math.pi * (t - a.warmup_steps) / max(1, a.steps - a.warmup_steps))) * (
        a.lr - a.min_lr)


@torch.no_grad()
def evaluate(model, val, T, batch=16):
    n = (len(val) - 1) // T
    total, count = 0.0, 0
    for i in range(0, n, batch):
        w = torch.arange(i, min(n, i + batch)) * T
        x = torch.stack([val[s:s + T] for s in w.tolist()])
        y = torch.stack([val[s + 1:s + T + 1] for s in w.tolist()])
        total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
        count += y.numel()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tie-embeddings", action="store_true")
    ap.add_argument("--recipe", default="classic", choices=["classic", "modern"])
    ap.add_argument("--lr", type=float)
    ap.add_argument("--min-lr", type=float)
    ap.add_argument("--muon-lr", type=float, default=0.02)
    ap.add_argument("--warmup-steps", type=int)
    ap.add_argument("--decay-fraction", type=float, default=0.4)
    ap.add_argument("--beta2", type=float, default=0.95)  # tapegrad train's default
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    modern = a.recipe == "modern"
    a.lr = a.lr if a.lr is not None else (6e-3 if modern else 1e-3)
    a.min_lr = a.min_lr if a.min_lr is not None else (0.0 if modern else a.lr / 10)
    a.warmup_steps = a.warmup_steps if a.warmup_steps is not None else min(200, a.steps // 20)
    a.schedule = "wsd" if modern else "cosine"
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, vocab = read_tokens(a.train)
    val, _ = read_tokens(a.val)
    T = a.context
    model = LM(vocab, T, a.d_model, a.layers, a.heads, a.tie_embeddings, qk_norm=modern)
    hidden = [p for n, p in model.named_parameters() if n.startswith("blocks.") and p.ndim == 2]
    others = [p for n, p in model.named_parameters() if not (n.startswith("blocks.") and p.ndim == 2)]
    matrices = [p for p in others if p.ndim == 2]
    vectors = [p for p in others if p.ndim < 2]
    adamw_groups = [{"params": vectors, "weight_decay": 0.0}, {"params": matrices, "weight_decay": a.weight_decay}]
    if modern:  # torch.optim.Muon for the blocks' matrices, AdamW for the embedding, head and gains
        opts = [torch.optim.AdamW(adamw_groups, lr=a.lr, betas=(0.9, a.beta2), eps=1e-8),
                torch.optim.Muon(hidden, lr=a.muon_lr, weight_decay=0.0, momentum=0.95, nesterov=True)]
    else:
        adamw_groups[1]["params"] = matrices + hidden
        opts = [torch.optim.AdamW(adamw_groups, lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)]
    peaks = [[g["lr"] for g in o.param_groups] for o in opts]
    gen = torch.Generator().manual_seed(a.seed)
    curve, train_s = [], 0.0
    for step in range(a.steps):
        t0 = time.perf_counter()
        scale = lr_at(step, a) / a.lr
        for o, pk in zip(opts, peaks):
            for g, p in zip(o.param_groups, pk):
                g["lr"] = p * scale
        starts = torch.randint(0, len(train) - T, (a.batch_size,), generator=gen)
        x = torch.stack([train[s:s + T] for s in starts.tolist()])
        y = torch.stack([train[s + 1:s + T + 1] for s in starts.tolist()])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for o in opts:
            o.step()
        train_s += time.perf_counter() - t0
        done = step + 1
        if done % a.eval_every == 0 or done == a.steps:
            vl = evaluate(model, val, T)
            curve.append({"step": done, "train_s": round(train_s, 3), "val_loss": vl})
            print(f"step {done}/{a.steps}  train loss {loss.item():.4f}  val loss {vl:.4f}  {train_s:.1f} s", flush=True)
    print("RESULT " + json.dumps({"peer": "pytorch", "torch": torch.__version__, "recipe": a.recipe,
                                  "threads": a.threads, "curve": curve}))


if __name__ == "__main__":
    main()

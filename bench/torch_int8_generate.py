"""torch_int8_generate.py -- PyTorch's batch-1 greedy decoding with a KV cache, in float32 and with
torch.ao.quantization.quantize_dynamic (int8 weights, activations quantized per call), for bench/int8.py.

The model has the shapes of tapegrad's presets (Llama-style: RMSNorm, RoPE, multi-head attention, SwiGLU,
untied head; random weights: only the speed is measured). It is written here, for PyTorch 1.13 (Debian's
python3-torch) and 2.x alike: attention over the cache is spelled out (no scaled_dot_product_attention).
  python3 bench/torch_int8_generate.py --config tiny --tokens 256 --threads 1 --modes fp32,qint8
Prints one `RESULT {json}` line per mode: tok_s over the timed pass (after one untimed pass).
"""
import argparse, json, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "small": dict(vocab=10000, context=256, d_model=256, layers=4, heads=8, d_ff=688),
    "tiny": dict(vocab=10000, context=256, d_model=512, layers=4, heads=16, d_ff=1344),
}


class Norm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.h = c["d_model"], c["heads"]
        self.ln1, self.ln2 = Norm(d), Norm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, c["d_ff"], bias=False), nn.Linear(d, c["d_ff"], bias=False)
        self.w2 = nn.Linear(c["d_ff"], d, bias=False)

    def forward(self, x, cos, sin, cache, pos):  # x [1, 1, C]
        B, T, C = x.shape
        D = C // self.h
        h = self.ln1(x)
        q, k, v = (p(h).view(B, T, self.h, D).transpose(1, 2) for p in (self.q, self.k, self.v))
        q, k = rotate(q, cos[pos], sin[pos]), rotate(k, cos[pos], sin[pos])
        kc, vc = cache
        kc[:, :, pos] = k[:, :, 0]
        vc[:, :, pos] = v[:, :, 0]
        att = (q @ kc[:, :, :pos + 1].transpose(-1, -2)) / math.sqrt(D)  # [1, H, 1, pos+1]
        y = F.softmax(att, -1) @ vc[:, :, :pos + 1]
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.ln2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def rotate(x, cos, sin):  # interleaved pairs (2k, 2k+1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class LM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(c["vocab"], c["d_model"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.ln = Norm(c["d_model"])
        self.head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        D = c["d_model"] // c["heads"]
        ang = torch.arange(c["context"]).float()[:, None] * (10000.0 ** (-torch.arange(0, D, 2).float() / D))[None]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, ids, caches, pos):
        x = self.emb(ids)
        for layer, cache in zip(self.layers, caches):
            x = layer(x, self.cos, self.sin, cache, pos)
        return self.head(self.ln(x))


@torch.no_grad()
def time_decode(model, c, n):
    H, D = c["heads"], c["d_model"] // c["heads"]

    def run():
        caches = [(torch.zeros(1, H, c["context"], D), torch.zeros(1, H, c["context"], D)) for _ in range(c["layers"])]
        ids = torch.zeros(1, 1, dtype=torch.long)
        for p in range(n):
            ids = model(ids, caches, p)[:, -1].argmax(-1, keepdim=True)

    run()
    t0 = time.perf_counter()
    run()
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="fp32,qint8")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    c = CONFIGS[a.config]
    for mode in a.modes.split(","):
        model = LM(c).eval()
        if mode == "qint8":
            model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        elif mode != "fp32":
            raise SystemExit(f"unknown mode {mode} (fp32, qint8)")
        tok_s = time_decode(model, c, min(a.tokens, c["context"]))
        print("RESULT " + json.dumps(dict(kind="generate", peer="pytorch", torch=torch.__version__, config=a.config,
                                          mode=mode, threads=a.threads, tokens=a.tokens, tok_s=tok_s)), flush=True)


if __name__ == "__main__":
    main()

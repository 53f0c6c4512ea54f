#!/usr/bin/env python3
"""race_eval_nanogpt.py — nanoGPT's checkpoint evaluated over its WHOLE validation split, the way tapegrad's
`eval` does (lm/evaluate.h): non-overlapping windows at 0, T, 2T, … ((N − 1) // T of them), every position
predicted once, the mean cross-entropy in nats per character. nanoGPT's own printed figure is an estimate over
20 random batches. Used by bench/race.py; runs nanoGPT's own model.py (the peer's folder is given).

    python race_eval_nanogpt.py NANOGPT_DIR CKPT VAL_BIN   → one line of JSON: {"loss": ..., "tokens": ...}
"""
import json
import sys

import numpy as np
import torch


def main():
    nanogpt_dir, ckpt_path, val_path = sys.argv[1:4]
    sys.path.insert(0, nanogpt_dir)
    from model import GPT, GPTConfig  # nanoGPT's model.py

    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    model = GPT(GPTConfig(**ckpt["model_args"]))
    state = {k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()}
    model.load_state_dict(state)
    model.eval()
    data = torch.from_numpy(np.fromfile(val_path, dtype=np.uint16).astype(np.int64))
    T = ckpt["model_args"]["block_size"]
    windows = (len(data) - 1) // T
    total, batch = 0.0, 64
    with torch.no_grad():
        for w0 in range(0, windows, batch):
            idx = torch.arange(w0, min(w0 + batch, windows)) * T
            x = torch.stack([data[i:i + T] for i in idx.tolist()])
            y = torch.stack([data[i + 1:i + 1 + T] for i in idx.tolist()])
            logits, _ = model(x, y)
            total += torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1),
                                                       reduction="sum").item()
    print(json.dumps({"loss": total / (windows * T), "tokens": windows * T, "iter": ckpt.get("iter_num")}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_tasks.py — a small synthetic instruction set for `tapegrad train --sft` (docs/training.md,
"Instruction tuning"): three tasks whose answers can be checked exactly, written as JSONL in both formats
the tool reads ({"messages": [...]} and {"prompt": ..., "completion": ...}).

  reverse: <word>        → the word backwards          ("reverse: garden" → "nedrag")
  add <a> and <b>        → the sum, 0 ≤ a, b < 50       ("add 12 and 7"    → "19")
  first letter of <word> → its first letter             ("first letter of lamp" → "l")

The held-out file uses words and number pairs that never occur in the training file, so a model that
answers them right has learned the task, not the examples. Deterministic (fixed seed).

  python3 examples/chat/make_tasks.py OUT_DIR      # OUT_DIR/train.jsonl, OUT_DIR/heldout.jsonl, OUT_DIR/heldout_prompts.txt
"""
import json
import random
import sys
from pathlib import Path

WORDS = """apple baby ball bear bed bell bird boat book box boy bread cake car cat chair cloud coat cow cup dog
door duck egg farm fish flag flower frog game garden girl goat grass hat hill horse house jam key king kite lamp
leaf lion milk moon mouse nest night park pen pig plant queen rain ring river road rock rose sand sea sheep ship
shoe sky snow sock star stone sun table tent tiger tree truck water wind window wolf yard zoo bus cup drum fox
gift hen ice jar jet kid log map net owl pan pot rat rug toy van web yak""".split()
SYSTEM = "You answer in one word."


def example(rng, words, pairs, task):
    if task == 0:
        w = rng.choice(words)
        return f"reverse: {w}", w[::-1]
    if task == 1:
        a, b = rng.choice(pairs)
        return f"add {a} and {b}", str(a + b)
    w = rng.choice(words)
    return f"first letter of {w}", w[0]


def record(rng, prompt, answer):
    if rng.random() < 0.5:
        return {"prompt": prompt, "completion": answer}
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    if rng.random() < 0.5:
        messages.insert(0, {"role": "system", "content": SYSTEM})
    return {"messages": messages}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tasks")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2026)
    words = sorted(set(WORDS))
    rng.shuffle(words)
    held_words, train_words = words[:15], words[15:]
    pairs = [(a, b) for a in range(50) for b in range(50)]
    rng.shuffle(pairs)
    held_pairs, train_pairs = pairs[:60], pairs[60:]
    with open(out / "train.jsonl", "w") as f:
        for _ in range(6000):
            p, a = example(rng, train_words, train_pairs, rng.randrange(3))
            f.write(json.dumps(record(rng, p, a)) + "\n")
    held = [example(rng, held_words, held_pairs, i % 3) for i in range(150)]
    with open(out / "heldout.jsonl", "w") as f:
        for p, a in held:
            f.write(json.dumps({"prompt": p, "completion": a}) + "\n")
    with open(out / "heldout_prompts.txt", "w") as f:
        for p, _ in held:
            f.write(p + "\n")
    print(f"wrote {out}/train.jsonl (6000 examples), {out}/heldout.jsonl and heldout_prompts.txt (150)")


if __name__ == "__main__":
    main()

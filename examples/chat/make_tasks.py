#!/usr/bin/env python3
"""make_tasks.py — a small synthetic instruction set for `tapegrad train --sft` (docs/training.md,
"Instruction tuning"): three tasks whose answers can be checked exactly, written as JSONL in both formats
the tool reads ({"messages": [...]} and {"prompt": ..., "completion": ...}).

  reverse the words: <w1> <w2> <w3>   → the words in reverse order   ("reverse the words: cat sun boat" → "boat sun cat")
  last word of: <w1> ... <wk>          → the last word                ("last word of: egg hat" → "hat")
  say twice: <w>                       → the word twice               ("say twice: kite" → "kite kite")

The tasks work on whole words, the units a byte-level BPE model sees (a task on letters, such as spelling a
word backwards, asks a model to know the letters inside a token it has only ever seen whole). The held-out
prompts (50 + 50 + 15) are word combinations, and for "say twice" words, that never occur in the training file, so a model that answers them right has
learned the task, not the examples. Deterministic (fixed seed).

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
SYSTEM = "Answer with the words only."


def example(rng, words, task):
    if task == 0:
        ws = rng.sample(words, 3)
        return "reverse the words: " + " ".join(ws), " ".join(reversed(ws))
    if task == 1:
        ws = rng.sample(words, rng.randint(2, 4))
        return "last word of: " + " ".join(ws), ws[-1]
    w = rng.choice(words)
    return f"say twice: {w}", f"{w} {w}"


def record(rng, turns):
    """One training example: a single prompt/completion, or a conversation of the given (prompt, answer) turns,
    sometimes after a system message (a third of the examples hold two or three turns, so that a model also
    answers the latest question of a conversation)."""
    if len(turns) == 1 and rng.random() < 0.5:
        return {"prompt": turns[0][0], "completion": turns[0][1]}
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": SYSTEM})
    for prompt, answer in turns:
        messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {"messages": messages}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tasks")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2026)
    words = sorted(set(WORDS))
    # Held out: 50 prompts of each of the first two tasks, and "say twice" on 15 words it never sees in training.
    twice_held = sorted(rng.sample(words, 15))
    held, seen = [], set()
    for task in (0, 1):
        while len(held) < 50 * (task + 1):
            p, a = example(rng, words, task)
            if p not in seen:
                seen.add(p)
                held.append((p, a))
    for w in twice_held:
        held.append((f"say twice: {w}", f"{w} {w}"))
        seen.add(held[-1][0])
    with open(out / "train.jsonl", "w") as f:
        n = 0
        while n < 6000:
            task = rng.randrange(3)
            p, a = example(rng, [w for w in words if w not in set(twice_held)] if task == 2 else words, task)
            if p in seen:
                continue
            turns = [(p, a)]
            while len(turns) < 3 and rng.random() < (0.33 if len(turns) == 1 else 0.3):
                task = rng.randrange(3)
                q, r = example(rng, [w for w in words if w not in set(twice_held)] if task == 2 else words, task)
                if q not in seen:
                    turns.append((q, r))
            f.write(json.dumps(record(rng, turns)) + "\n")
            n += 1
    with open(out / "heldout.jsonl", "w") as f:
        for p, a in held:
            f.write(json.dumps({"prompt": p, "completion": a}) + "\n")
    with open(out / "heldout_prompts.txt", "w") as f:
        for p, _ in held:
            f.write(p + "\n")
    print(f"wrote {out}/train.jsonl (6000 examples), {out}/heldout.jsonl and heldout_prompts.txt ({len(held)})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""hf_tokenizer_check.py — `tapegrad tokenize train` + `tokenize encode`, then the Hugging Face
`tokenizers` library on DIR/tokenizer.json must give exactly the ids of the token file.

usage: hf_tokenizer_check.py TAPEGRAD_TOOL TINYSTORIES_TXT
Exit 0: identical; 1: a difference (the first one is printed); 77: skipped (no `tokenizers` package).
"""
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77

try:
    from tokenizers import Tokenizer
except ImportError:
    print("SKIP: the Python package 'tokenizers' is not installed for", sys.executable)
    sys.exit(SKIP)

# Special tokens in odd places, non-ASCII, odd whitespace,
# contractions and digit runs (each GPT-2 regex branch).
TRICKY = "\n".join([
    "<|endoftext|>Once upon a time<|endoftext|><|endoftext|> there was<|endoftext|>",
    "a <|endoftext|>b <|endoftext|> c<|endoftext|>\n<|endoftext|>",
    "<|endoftext", "|> <| endoftext |> <|endoftext|",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe \u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "emoji \U0001F643\U0001F680 \U0001F468\u200d\U0001F469\u200d\U0001F467 e\u0301 combining",
    "curly \u201cquotes\u201d \u2018single\u2019 dash \u2014 ellipsis\u2026",
    "tabs\t\tand  double  spaces   triple\u00a0nbsp\u3000ideographic\u2028line-sep",
    "trailing spaces   \n   leading spaces\n\n\n\nblank lines\r\nCRLF\r\n\rCR only\x0bVT\x0cFF",
    "don't I'll WE'RE you've she'd it's THEY'LL 'tis o'clock",
    "numbers 12345 3.14159 1,000,000 0x1F 2024-01-01 \u0663\u0664\u0665",
    "punct!!! ??? ... ;;; --- *** ((())) [[]] {{}} <<>> @#$%^&*",
    "mixed\ttab \t \t\n \n  \n",
    "end with spaces   ",
])


def read_token_file(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, count, vocab = struct.unpack_from("<8sIIQQ", data, 0)
    assert magic == b"TGTOKENS", f"{path}: bad magic {magic!r}"
    assert version == 1, f"{path}: version {version}"
    assert width in (2, 4), f"{path}: width {width}"
    assert len(data) == 32 + count * width, f"{path}: {len(data)} bytes for {count} tokens of {width} bytes"
    ids = list(struct.unpack_from(f"<{count}{'H' if width == 2 else 'I'}", data, 32))
    return ids, vocab


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(result.stdout, end="", flush=True)
    if result.returncode != 0:
        raise SystemExit(f"FAIL: exit status {result.returncode}")


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check(tool, hf, tokenizer_dir, name, text, tmp):
    text_path = os.path.join(tmp, name + ".txt")
    token_path = os.path.join(tmp, name + ".bin")
    with open(text_path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    run([tool, "tokenize", "encode", "--tokenizer", tokenizer_dir, "--input", text_path, "--out", token_path])
    ours, vocab = read_token_file(token_path)
    theirs = hf.encode(text, add_special_tokens=False).ids
    if vocab != hf.get_vocab_size(with_added_tokens=True):
        raise SystemExit(f"FAIL {name}: token file vocab {vocab}, tokenizers says {hf.get_vocab_size()}")
    if ours != theirs:
        i = first_difference(ours, theirs)
        ctx = slice(max(0, i - 5), i + 5)
        raise SystemExit(f"FAIL {name}: {len(ours)} tapegrad ids vs {len(theirs)} tokenizers ids, first difference at "
                         f"{i}: tapegrad {ours[ctx]} ({[hf.id_to_token(t) for t in ours[ctx]]}) vs tokenizers "
                         f"{theirs[ctx]} ({[hf.id_to_token(t) for t in theirs[ctx]]})")
    decoded = hf.decode(ours, skip_special_tokens=False)
    if decoded != text:
        raise SystemExit(f"FAIL {name}: tokenizers' decode of our ids is not the text")
    print(f"ok {name}: {len(text.encode('utf-8'))} bytes -> {len(ours)} ids, identical to tokenizers", flush=True)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    tool, corpus = sys.argv[1], sys.argv[2]
    with open(corpus, "rb") as f:
        raw = f.read(400_000)
    # whole lines only (never a cut UTF-8 character): ~200 KB to train on, the next ~100 KB to encode
    cut1 = raw.rindex(b"\n", 0, 200_000) + 1
    cut2 = raw.rindex(b"\n", 0, 300_000) + 1
    train_text, held_out = raw[:cut1].decode("utf-8"), raw[cut1:cut2].decode("utf-8")
    with tempfile.TemporaryDirectory(prefix="tapegrad_hf_check_") as tmp:
        # two --input files (trained on their concatenation), the second with the tricky text
        half = train_text.index("\n", len(train_text) // 2) + 1
        inputs = []
        for i, part in enumerate([train_text[:half], train_text[half:] + TRICKY * 3]):
            inputs.append(os.path.join(tmp, f"train{i}.txt"))
            with open(inputs[-1], "w", encoding="utf-8", newline="") as f:
                f.write(part)
        tokenizer_dir = os.path.join(tmp, "tokenizer")
        run([tool, "tokenize", "train", "--input", *inputs, "--vocab-size", "1000", "--out", tokenizer_dir])
        hf = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
        if hf.get_vocab_size() != 1000 or hf.token_to_id("<|endoftext|>") != 0:
            raise SystemExit(f"FAIL: tokenizers sees vocab {hf.get_vocab_size()}, <|endoftext|> = "
                             f"{hf.token_to_id('<|endoftext|>')}")
        check(tool, hf, tokenizer_dir, "held_out", held_out, tmp)
        check(tool, hf, tokenizer_dir, "tricky", TRICKY, tmp)
        check(tool, hf, tokenizer_dir, "train", train_text, tmp)
        check(tool, hf, tokenizer_dir, "empty", "", tmp)

        # a second special token with a space and non-ASCII: `tokenizers` must keep its id (1)
        odd = "<|fin du texte \u00e9|>"
        odd_dir = os.path.join(tmp, "tokenizer_odd_special")
        run([tool, "tokenize", "train", "--input", inputs[0], "--vocab-size", "600", "--special", "<|endoftext|>",
             "--special", odd, "--out", odd_dir])
        hf = Tokenizer.from_file(os.path.join(odd_dir, "tokenizer.json"))
        if hf.token_to_id(odd) != 1:
            raise SystemExit(f"FAIL: tokenizers gives {odd!r} id {hf.token_to_id(odd)}, not 1")
        check(tool, hf, odd_dir, "odd_special", f"x{odd}{odd} y <|endoftext|>{odd}\n" + TRICKY.replace("\n", odd), tmp)
    print("PASS: tokenizers", __import__("tokenizers").__version__, "gives exactly tapegrad's ids")


if __name__ == "__main__":
    main()

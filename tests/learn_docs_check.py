#!/usr/bin/env python3
"""learn_docs_check.py — proves that a chapter of docs/learn shows its programs' current output.

Usage:
    learn_docs_check.py CHAPTER.md BIN_DIR            # check: exit 0 match, 1 mismatch/error, 77 skipped
    learn_docs_check.py CHAPTER.md BIN_DIR --update   # rewrite the output blocks with what the programs print
    learn_docs_check.py CHAPTER.md BIN_DIR --part P   # check only the blocks marked part=P

A chapter marks each output block with an HTML comment on the line directly before the fenced block:

    <!-- output: 01_derivative tol=1e-6 args="--steps 3" mag=10 part=golden -->
    ```text
    ...the program's stdout, verbatim...
    ```

The checker runs BIN_DIR/PROGRAM (with args; cwd a fresh temporary directory; environment inherited;
a 240 s timeout) and compares its stdout with the block, line by line:
  * runs of whitespace collapse to one space, leading/trailing whitespace is ignored;
  * numbers (also glued to punctuation, as in "[0.5," or "x=1e-3;") compare with tolerance:
    |got - expected| <= tol * max(1, |expected|)  (tol defaults to 1e-6); nan/inf compare as text;
  * a number the chapter writes with an exponent ("2.4e-15", "1.05e-10") is an order of magnitude,
    and the absolute floor above would let any small value pass: it must also be within a factor
    mag of the chapter's (expected/mag <= got <= expected*mag, the same sign; mag defaults to 10,
    mag=0 turns this off); a shown 0 ("0.0e+00") keeps the tol rule only; a printed exact 0 matches a
    shown magnitude at or below 1e-12 (float64 round-off: a build that adds in the same order as the
    other computation, e.g. the sanitizer build at another optimisation level, agrees exactly);
  * everything else must be equal;
  * a block line that is exactly "..." matches any number of output lines (zero or more).
A program that exits 77 skips its blocks (with the program's reason); the other blocks are still
checked, and the chapter exits 77 only when they all match. A chapter with no
marker must say so with <!-- output: none (why) --> or it fails: a forgotten marker is not a pass.
A block marked part=NAME is checked only with --part NAME (and the blocks without part= only
without --part): a part that may skip (data a clone lacks) then gets a ctest of its own, and the
other blocks' test passes or fails on any clone.
Python 3.11 standard library only.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

SKIP = 77
TIMEOUT_S = 240
DEFAULT_TOL = 1e-6
DEFAULT_MAG = 10.0

MARKER = re.compile(r"^\s*<!--\s*output:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})")
# A decimal number with optional sign, fraction and exponent: 3, -0.25, .5, 1e-6, 2.5E+03.
NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
PROGRAM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class CheckError(Exception):
    """A problem with the chapter itself (bad marker, missing program): reported, exit 1."""


@dataclass
class Block:
    program: str
    args: list[str]
    tol: float
    mag: float
    part: str
    marker_line: int                 # 1-based line number of the marker comment
    first: int                       # 0-based index of the first content line (after the opening fence)
    end: int                         # 0-based index of the closing fence
    expected: list[str] = field(default_factory=list)


def parse_marker(body: str, line_no: int) -> tuple[str, list[str], float, float, str]:
    try:
        words = shlex.split(body)
    except ValueError as e:
        raise CheckError(f"line {line_no}: cannot parse the output marker ({e})") from None
    if not words:
        raise CheckError(f"line {line_no}: the output marker names no program")
    program, args, tol, mag, part = words[0], [], DEFAULT_TOL, DEFAULT_MAG, ""
    if not PROGRAM_NAME.match(program):
        raise CheckError(f"line {line_no}: '{program}' is not a program name")
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq:
            raise CheckError(f"line {line_no}: '{word}' in the output marker is not key=value (tol=, args=)")
        if key == "tol":
            try:
                tol = float(value)
            except ValueError:
                raise CheckError(f"line {line_no}: tol={value} is not a number") from None
            if not tol >= 0:
                raise CheckError(f"line {line_no}: tol={value} must be >= 0")
        elif key == "mag":
            try:
                mag = float(value)
            except ValueError:
                raise CheckError(f"line {line_no}: mag={value} is not a number") from None
            if not (mag == 0 or mag >= 1):
                raise CheckError(f"line {line_no}: mag={value} must be 0 (off) or >= 1")
        elif key == "part":
            if not PROGRAM_NAME.match(value):
                raise CheckError(f"line {line_no}: part={value} is not a name (letters, digits, _ . -)")
            part = value
        elif key == "args":
            args = shlex.split(value)
        else:
            raise CheckError(f"line {line_no}: unknown key '{key}' in the output marker (known: tol, args, mag, part)")
    return program, args, tol, mag, part


def find_blocks(lines: list[str]) -> tuple[list[Block], bool]:
    """The marked output blocks, and whether the chapter declares it has none (<!-- output: none ... -->)."""
    blocks, declared_none, i = [], False, 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        body = m.group("body")
        if body == "none" or body.startswith("none ") or body.startswith("none("):
            declared_none = True
            i += 1
            continue
        program, args, tol, mag, part = parse_marker(body, i + 1)
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise CheckError(f"line {i + 1}: the output marker must be directly followed by a fenced block (```)")
        close = fence.group("fence")
        j = i + 2
        while j < len(lines) and not (lines[j].strip().startswith(close[0] * len(close))
                                      and set(lines[j].strip()) == {close[0]}):
            j += 1
        if j == len(lines):
            raise CheckError(f"line {i + 2}: the fenced block after the output marker is never closed")
        blocks.append(Block(program, args, tol, mag, part, i + 1, i + 2, j, lines[i + 2:j]))
        i = j + 1
    if blocks and declared_none:
        raise CheckError("the chapter says <!-- output: none --> but also has output markers")
    return blocks, declared_none


# ---- comparing -------------------------------------------------------------------------------------

def _split(s: str) -> list[str]:
    """s split into alternating text and number pieces: "x=[0.5, 1e-3]" → ["x=[", "0.5", ", ", "1e-3", "]"]."""
    pieces, pos = [], 0
    for m in NUMBER.finditer(s):
        pieces.append(s[pos:m.start()])   # text (possibly empty) before the number
        pieces.append(m.group())          # the number
        pos = m.end()
    pieces.append(s[pos:])
    return pieces                         # text at even indices, numbers at odd ones


# Below this a shown magnitude means "float64 round-off", which some builds get as exactly 0.
ROUND_OFF_FLOOR = 1e-12


def is_magnitude(text: str) -> bool:
    """Whether the chapter wrote this number with an exponent ("2.4e-15"): it then means its order of magnitude."""
    return "e" in text or "E" in text


def numbers_match(a: str, b: str, tol: float, mag: float) -> bool:
    """Whether the printed number b matches the chapter's a (see the module docstring)."""
    x, y = float(a), float(b)
    if not math.isfinite(x) or not math.isfinite(y):   # overflowed literals ("1e999") compare as text
        return a == b
    if abs(y - x) > tol * max(1.0, abs(x)):
        return False
    if mag and is_magnitude(a) and x != 0:
        if y == 0 and abs(x) <= ROUND_OFF_FLOOR:
            return True                   # exact agreement is the best case of float64 round-off
        # No absolute floor here: 2.4e-15 shown and 3e-9 printed is a different result.
        return (x > 0) == (y > 0) and abs(x) / mag <= abs(y) <= abs(x) * mag
    return True


def line_matches(expected: str, got: str, tol: float, mag: float = 0.0) -> bool:
    e, g = _split(" ".join(expected.split())), _split(" ".join(got.split()))
    if len(e) != len(g):
        return False
    for k, (a, b) in enumerate(zip(e, g)):
        if k % 2 == 0:
            if a != b:
                return False
        elif not numbers_match(a, b, tol, mag):
            return False
    return True


def is_wildcard(line: str) -> bool:
    return line.strip() == "..."


def compare(expected: list[str], got: list[str], tol: float,
            mag: float = 0.0) -> tuple[bool, int | None, int | None]:
    """Whether got matches expected ('...' lines match any run of lines). On a mismatch also the first
    expected line that could not be matched (index, or None when the output has extra lines at the end)
    and the output line it was compared with (index, or None when the output ended)."""
    n, m = len(expected), len(got)
    # reach[i][j]: expected[:i] can match got[:j]. Filled forward; fine for outputs of a few hundred lines.
    reach = [[False] * (m + 1) for _ in range(n + 1)]
    reach[0][0] = True
    for i in range(n + 1):
        for j in range(m + 1):
            if not reach[i][j] or i == n:
                continue
            if is_wildcard(expected[i]):
                for jj in range(j, m + 1):
                    reach[i + 1][jj] = True
                break  # every later j of this row is already covered
            if j < m and line_matches(expected[i], got[j], tol, mag):
                reach[i + 1][j + 1] = True
    if reach[n][m]:
        return True, None, None
    # The deepest expected line reached tells where the output went wrong.
    deepest_i = max(i for i in range(n + 1) if any(reach[i]))
    first_j = min(j for j in range(m + 1) if reach[deepest_i][j])
    if deepest_i == n:
        last_j = max(j for j in range(m + 1) if reach[n][j])
        return False, None, last_j
    return False, deepest_i, (first_j if first_j < m else None)


# ---- running ---------------------------------------------------------------------------------------

@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def run_program(bin_dir: str, program: str, args: list[str]) -> Run:
    path = os.path.join(bin_dir, program)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise CheckError(f"the marker names program '{program}', but {path} does not exist "
                         f"(is there an examples/learn/{program}.cpp, and was it built?)")
    with tempfile.TemporaryDirectory(prefix="learn_") as cwd:
        try:
            p = subprocess.run([os.path.abspath(path), *args], cwd=cwd, capture_output=True, text=True,
                               errors="replace", timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CheckError(f"{program} {' '.join(args)} ran longer than {TIMEOUT_S} s") from None
    return Run(p.returncode, p.stdout, p.stderr)


def command_line(block: Block) -> str:
    return " ".join([block.program, *(shlex.quote(a) for a in block.args)])


def report_mismatch(chapter: str, block: Block, got: list[str], where_e: int | None, where_g: int | None) -> None:
    print(f"{chapter}:{block.marker_line}: the output of `{command_line(block)}` differs from the chapter "
          f"(tol={block.tol:g}, mag={block.mag:g})")
    if where_e is None:
        print(f"  the program printed more lines than the block shows; first extra line {where_g + 1}:")
        print(f"    got:      {got[where_g]!r}")
    else:
        print(f"  first differing line: chapter line {block.first + 1 + where_e}")
        print(f"    expected: {block.expected[where_e]!r}")
        print(f"    got:      {got[where_g]!r}" if where_g is not None else "    got:      <end of output>")
    print("  the whole actual output (paste it into the block, or rerun with --update):")
    print("-----8<-----")
    print("\n".join(got))
    print("-----8<-----")


def main() -> int:
    ap = argparse.ArgumentParser(description="Check that a docs/learn chapter shows its programs' current output.")
    ap.add_argument("chapter", help="the chapter, e.g. docs/learn/01_derivative.md")
    ap.add_argument("bin_dir", help="the directory holding the built programs, e.g. build/examples/learn")
    ap.add_argument("--update", action="store_true",
                    help="rewrite every block that does not match with the program's actual output")
    ap.add_argument("--part", default="",
                    help="check only the blocks marked part=PART (default: only the blocks without part=)")
    opt = ap.parse_args()
    chapter = opt.chapter

    try:
        with open(chapter, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"{chapter}: cannot read the chapter ({e.strerror})")
        return 1
    lines = text.split("\n")

    try:
        all_blocks, declared_none = find_blocks(lines)
        blocks = [b for b in all_blocks if b.part == opt.part]
        if opt.part and not blocks:
            print(f"{chapter}: no output block is marked part={opt.part}")
            return 1
        if all_blocks and not blocks:
            print(f"{chapter}: every output block is marked part=…; nothing to check without --part")
            return 0
        if not blocks:
            if declared_none:
                print(f"{chapter}: no output to check (the chapter says so)")
                return 0
            print(f"{chapter}: no <!-- output: PROGRAM --> marker; mark the output blocks, or say "
                  f"<!-- output: none (why) --> if the chapter has none")
            return 1

        runs: dict[tuple[str, tuple[str, ...]], Run] = {}
        failures, updated, skipped = 0, 0, 0
        skip_reasons: list[str] = []
        for block in blocks:
            key = (block.program, tuple(block.args))
            if key not in runs:
                runs[key] = run_program(opt.bin_dir, block.program, block.args)
            r = runs[key]
            if r.returncode == SKIP:
                # The other blocks are still checked; the chapter reports Skipped only if they all match.
                reason = (r.stdout + r.stderr).strip() or "(no reason printed)"
                print(f"{chapter}:{block.marker_line}: skipped — {command_line(block)} exited 77: {reason}")
                skip_reasons.append(reason)
                skipped += 1
                continue
            if r.returncode != 0:
                print(f"{chapter}:{block.marker_line}: `{command_line(block)}` failed with exit code {r.returncode}")
                print("stderr:\n" + r.stderr.rstrip())
                print("stdout:\n" + r.stdout.rstrip())
                failures += 1
                continue
            got = r.stdout.split("\n")
            if got and got[-1] == "":
                got.pop()  # the final newline ends the last line; it is not an empty line of its own
            ok, where_e, where_g = compare(block.expected, got, block.tol, block.mag)
            if ok:
                continue
            if opt.update:
                if any(is_wildcard(x) for x in block.expected):
                    print(f"{chapter}:{block.marker_line}: note: the block had '...' lines; they are replaced "
                          f"by the full output — put them back where the output depends on the machine")
                block.expected = got
                updated += 1
            else:
                report_mismatch(chapter, block, got, where_e, where_g)
                failures += 1
    except CheckError as e:
        msg = str(e)
        print(f"{chapter}:{msg}" if msg.startswith("line ") else f"{chapter}: {msg}")
        return 1

    if opt.update and updated:
        out = list(lines)
        for block in reversed(blocks):          # from the bottom up, so earlier indices stay valid
            out[block.first:block.end] = block.expected
        with open(chapter, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
        print(f"{chapter}: updated {updated} block(s)")
    if failures:
        return 1
    if skipped:
        print(f"{chapter}: {len(blocks) - skipped} output block(s) match, {skipped} skipped")
        # The last line, in the form scripts/ctest_tally.py reads a skip's reason from.
        first = skip_reasons[0].splitlines()[0]
        print(first if first.startswith("SKIP:") else f"SKIP: {first}")
        return SKIP
    if not opt.update:
        print(f"{chapter}: {len(blocks)} output block(s) match")
    return 0


if __name__ == "__main__":
    sys.exit(main())

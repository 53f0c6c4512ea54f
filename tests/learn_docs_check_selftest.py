#!/usr/bin/env python3
"""learn_docs_check_selftest.py — tests tests/learn_docs_check.py on small fake chapters and programs, and
tests/learn_commands_check.py on a fake docs folder and build.

Each case writes a chapter (markdown) and shell-script "programs" into a temporary directory, runs the
checker on them and asserts its exit code and what it prints. Exit 0 when every case passes.
Usage: learn_docs_check_selftest.py   (ctest: "learn: docs checker self-test")
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "learn_docs_check.py")
COMMANDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "learn_commands_check.py")
FENCE = "```"


def program(bin_dir: str, name: str, script: str) -> None:
    path = os.path.join(bin_dir, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script + "\n")
    os.chmod(path, 0o755)


def chapter(work: str, body: str) -> str:
    path = os.path.join(work, "chapter.md")
    with open(path, "w") as f:
        f.write(body)
    return path


def block(marker: str, *lines: str) -> str:
    return f"Some prose.\n\n<!-- output: {marker} -->\n{FENCE}text\n" + "".join(l + "\n" for l in lines) + FENCE + "\n"


def check(md: str, bin_dir: str, *extra: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, CHECKER, md, bin_dir, *extra], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


failures: list[str] = []


def expect(name: str, got_rc: int, out: str, rc: int, *must_contain: str) -> None:
    missing = [s for s in must_contain if s not in out]
    if got_rc != rc or missing:
        failures.append(f"{name}: exit {got_rc} (want {rc}); missing {missing}\n{out}")
    else:
        print(f"ok   {name}")


def commands_selftest() -> None:
    """tests/learn_commands_check.py on a fake docs folder and a fake build (two ctests, a fake Catch2 binary)."""
    with tempfile.TemporaryDirectory() as work:
        docs, build = os.path.join(work, "docs"), os.path.join(work, "build")
        os.makedirs(os.path.join(build, "tests"))
        os.mkdir(docs)
        with open(os.path.join(build, "CTestTestfile.cmake"), "w") as f:
            f.write('add_test("learn: 01 shows output" "true")\nadd_test("a seq-to-seq test" "true")\n')
        program(os.path.join(build, "tests"), "tapegrad_tests",
                'case "$*" in *"[seq2seq]"*) echo "3 matching test cases";; *) echo "0 matching test cases";; esac')

        def run(*md: str) -> tuple[int, str]:
            for name in os.listdir(docs):
                os.remove(os.path.join(docs, name))
            for k, text in enumerate(md):
                with open(os.path.join(docs, f"0{k + 1}_ch.md"), "w") as f:
                    f.write(text)
            p = subprocess.run([sys.executable, COMMANDS, docs, build], capture_output=True, text=True, timeout=60)
            return p.returncode, p.stdout + p.stderr

        expect("commands: a ctest regex that matches a test passes",
               *run("Run `ctest -R '^learn: 01'`.\n"), 0, "runs 1 test(s)")
        expect("commands: `ctest -R 'seq2seq'` matching no test fails, naming chapter, line and command",
               *run("Intro.\n", "x\n\nthen `ctest -R 'seq2seq'` must pass\n"), 1,
               "02_ch.md:3: `ctest -R 'seq2seq'` runs no test")
        expect("commands: a Catch2 tag that exists passes; one in a fenced block that does not fails",
               *run("`build/tests/tapegrad_tests \"[seq2seq]\"`\n```sh\ncd build && "
                    "tests/tapegrad_tests \"[nope]\"   # comment\n```\n"), 1,
               "runs 3 test(s)", "01_ch.md:3: `tests/tapegrad_tests \"[nope]\"` runs no test")
        os.remove(os.path.join(build, "tests", "tapegrad_tests"))
        expect("commands: without a built tapegrad_tests its commands are skipped (77)",
               *run("`ctest -R seq` and `build/tests/tapegrad_tests \"[x]\"`\n"), 77, "is not built")


def main() -> int:
    with tempfile.TemporaryDirectory() as work:
        bins = os.path.join(work, "bin")
        os.mkdir(bins)
        program(bins, "table", "printf 'h      error\\n0.1    [1.5e-03,\\n0.01   [1.5e-05,\\ndone MATCH\\n'")
        program(bins, "echo_args", 'echo "args: $*"; echo "cwd empty: $(ls -A | wc -l)"')
        program(bins, "skipper", "echo 'needs ../shared/data/cs336, not here'; exit 77")
        program(bins, "crasher", "echo partial; echo 'boom' >&2; exit 3")
        program(bins, "tiny", "echo 'worst error 3.0e-09: MATCH'; echo 'lr 0.000305'")
        program(bins, "exact", "echo 'worst error 0.0e+00: MATCH'")
        program(bins, "timing", "echo start; echo 'took 0.123 s'; echo 'took 0.456 s'; echo end")

        md = chapter(work, block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,", "done MATCH"))
        expect("exact match (whitespace collapsed, numbers glued to punctuation)", *check(md, bins), 0, "match")

        md = chapter(work, block("table tol=1e-2", "h error", "0.1 [1.51e-03,", "0.01 [1.5e-05,", "done MATCH"))
        expect("difference within tol passes", *check(md, bins), 0)

        md = chapter(work, block("table tol=1e-6", "h error", "0.1000002 [1.5e-03,", "0.01 [1.5e-05,", "done MATCH"))
        expect("difference of 2e-7 relative passes tol=1e-6", *check(md, bins), 0)

        md = chapter(work, block("table", "h error", "0.1 [1.6e-03,", "0.01 [1.5e-05,", "done MATCH"))
        expect("number outside tol fails with a diff", *check(md, bins), 1,
               "chapter.md:3:", "chapter line 6", "expected: '0.1 [1.6e-03,'", "got:      '0.1    [1.5e-03,'",
               "the whole actual output", "done MATCH")

        md = chapter(work, block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,", "done MISMATCH"))
        expect("text difference fails", *check(md, bins), 1, "expected: 'done MISMATCH'")

        md = chapter(work, block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,"))
        expect("output longer than the block fails", *check(md, bins), 1, "more lines than the block shows",
               "got:      'done MATCH'")

        md = chapter(work, block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,", "done MATCH", "more"))
        expect("output shorter than the block fails", *check(md, bins), 1, "<end of output>")

        md = chapter(work, block("timing", "start", "...", "end"))
        expect("'...' matches several lines", *check(md, bins), 0)

        md = chapter(work, block("timing", "start", "...", "took 0.123 s", "took 0.456 s", "...", "end"))
        expect("'...' matches zero lines", *check(md, bins), 0)

        md = chapter(work, block("timing", "start", "...", "took 9 s", "end"))
        expect("'...' does not hide a wrong line", *check(md, bins), 1, "expected: 'took 9 s'")

        md = chapter(work, block('echo_args args="--h 0.5 --name \'two words\'"', "args: --h 0.5 --name two words",
                                 "cwd empty: 0"))
        expect("args are passed; cwd is a fresh empty directory", *check(md, bins), 0)

        md = chapter(work, block("no_such_program", "x"))
        expect("a marker naming a missing program is an error", *check(md, bins), 1, "no_such_program",
               "does not exist")

        md = chapter(work, block("skipper", "x"))
        expect("a program exiting 77 skips, with its reason", *check(md, bins), 77, "needs ../shared/data/cs336")

        md = chapter(work, block("skipper", "x") + "\n" + block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,",
                                                                  "done MISMATCH"))
        expect("a skipped block does not hide another block's mismatch", *check(md, bins), 1,
               "expected: 'done MISMATCH'")

        md = chapter(work, block("skipper", "x") + "\n" + block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,",
                                                                  "done MATCH"))
        expect("the other blocks match: the chapter is skipped", *check(md, bins), 77, "1 output block(s) match, 1 skipped")

        md = chapter(work, block("crasher", "partial"))
        expect("a program failing is reported with its stderr", *check(md, bins), 1, "exit code 3", "boom")

        md = chapter(work, "# A chapter\n\nNo output here.\n")
        expect("a chapter without markers fails", *check(md, bins), 1, "no <!-- output: PROGRAM --> marker")

        md = chapter(work, "# A chapter\n\n<!-- output: none (only prose) -->\n")
        expect("a chapter that says it has no output passes", *check(md, bins), 0, "says so")

        md = chapter(work, "<!-- output: table -->\nnot a fence\n")
        expect("a marker without a fenced block is an error", *check(md, bins), 1, "line 1:", "fenced block")

        md = chapter(work, block("table tolerance=1", "x"))
        expect("an unknown marker key is an error", *check(md, bins), 1, "unknown key 'tolerance'")

        # Small numbers written with an exponent are compared by order of magnitude, not with tol's
        # absolute floor (under which every error column below 1e-6 used to pass).
        md = chapter(work, block("tiny", "worst error 2.4e-15: MATCH", "lr 0.000305"))
        expect("a small number 1e6 times off fails (no absolute floor for 2.4e-15)", *check(md, bins), 1,
               "expected: 'worst error 2.4e-15: MATCH'")

        md = chapter(work, block("tiny", "worst error 1.0e-09: MATCH", "lr 0.000305"))
        expect("a small number within a factor 10 passes", *check(md, bins), 0)

        md = chapter(work, block("tiny mag=2", "worst error 1.0e-09: MATCH", "lr 0.000305"))
        expect("mag=2 makes the factor 2", *check(md, bins), 1, "mag=2")

        md = chapter(work, block("tiny mag=0", "worst error 2.4e-15: MATCH", "lr 0.000305"))
        expect("mag=0 keeps only the tol rule", *check(md, bins), 0)

        # Another build may add in the same order and agree exactly: 0 is float64 round-off's best case.
        md = chapter(work, block("exact", "worst error 2.4e-15: MATCH"))
        expect("an exact 0 matches a shown float64 round-off (2.4e-15)", *check(md, bins), 0)

        md = chapter(work, block("exact", "worst error 1.0e-09: MATCH"))
        expect("an exact 0 does not match a shown 1e-9 (above round-off)", *check(md, bins), 1,
               "expected: 'worst error 1.0e-09")

        md = chapter(work, block("tiny", "worst error -3.0e-09: MATCH", "lr 0.000305"))
        expect("a small number of the other sign fails", *check(md, bins), 1, "expected: 'worst error -3.0e-09")

        md = chapter(work, block("tiny tol=1e-3", "worst error 3.0e-09: MATCH", "lr 0.0003"))
        expect("a number without an exponent keeps tol's floor", *check(md, bins), 0)

        # part=: a part that may skip (golden data a clone lacks) is a test of its own.
        table_ok = block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,", "done MATCH")
        md = chapter(work, block("skipper part=golden", "x") + "\n" + table_ok)
        expect("without --part the blocks without part= are checked: the chapter passes, not skipped",
               *check(md, bins), 0, "1 output block(s) match")
        expect("--part golden checks only that part: skipped", *check(md, bins, "--part", "golden"), 77,
               "needs ../shared/data/cs336")
        md = chapter(work, block("skipper part=golden", "x") + "\n"
                     + block("table", "h error", "0.1 [1.5e-03,", "0.01 [1.5e-05,", "done MISMATCH"))
        expect("a wrong answer outside the part still fails", *check(md, bins), 1, "expected: 'done MISMATCH'")
        expect("--part naming no block is an error", *check(md, bins, "--part", "gold"), 1,
               "no output block is marked part=gold")
        md = chapter(work, block("table part='a b'", "x"))
        expect("a part name with a space is an error", *check(md, bins), 1, "is not a name")

        # --update rewrites a stale block and leaves the rest of the chapter alone.
        stale = block("table", "h error", "0.1 [9.9e-03,") + "\nAfter the block.\n"
        md = chapter(work, stale)
        rc, out = check(md, bins, "--update")
        expect("--update exits 0 and says what it did", rc, out, 0, "updated 1 block(s)")
        with open(md) as f:
            updated = f.read()
        want = (block("table", "h      error", "0.1    [1.5e-03,", "0.01   [1.5e-05,", "done MATCH")
                + "\nAfter the block.\n")
        if updated != want:
            failures.append(f"--update wrote:\n{updated}\nwant:\n{want}")
        else:
            print("ok   --update rewrites exactly the stale block")
        expect("the updated chapter then checks", *check(md, bins), 0)

    commands_selftest()
    if failures:
        print(f"\n{len(failures)} case(s) FAILED:")
        for f in failures:
            print("FAIL " + f)
        return 1
    print("all checker self-tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

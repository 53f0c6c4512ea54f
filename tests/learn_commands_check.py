#!/usr/bin/env python3
"""learn_commands_check.py — every test command that docs/learn names must run at least one test.

Usage:
    learn_commands_check.py DOCS_DIR BUILD_DIR      # exit 0 all run a test, 1 one runs none, 77 skipped

A chapter that says "`ctest -R 'seq2seq'` must pass" promises a check; a regex that matches no test makes
ctest run nothing and exit 0, so the learner sees a pass for nothing. This script reads every .md under
DOCS_DIR, finds the commands in code (inline `…` spans and fenced blocks) that run tests:
  * `ctest …`                    — asked again as `ctest -N …` in BUILD_DIR: "Total Tests: N" must be > 0;
  * `…/tapegrad_tests "SPEC" …`  — asked as `BUILD_DIR/tests/tapegrad_tests --list-tests SPEC`:
                                   "N matching test cases" must be > 0,
and prints one line per command, naming the chapter, its line and the command. When tapegrad_tests is
not built (a build without the test suites) its commands are reported as skipped, and the script exits
77 if nothing else failed. Python 3.11 standard library only.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

SKIP = 77
INLINE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
TOTAL = re.compile(r"Total Tests:\s*(\d+)")
MATCHING = re.compile(r"(\d+)\s+matching test cases?")
# ctest options that choose tests (with their value) and those that take a value but choose nothing.
CTEST_SELECT = {"-R", "--tests-regex", "-E", "--exclude-regex", "-L", "--label-regex", "-LE",
                "--label-exclude", "-I", "--tests-information", "-U", "--union"}
CTEST_VALUE = {"-j", "--parallel", "-C", "--build-config", "--timeout", "--output-log", "-O",
               "--test-dir", "--repeat"}


def commands_in(text: str) -> list[tuple[int, str]]:
    """(line number, command) for every ctest / tapegrad_tests command in the code of a markdown text."""
    found: list[tuple[int, str]] = []
    in_fence = ""
    for no, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            in_fence = "" if in_fence and m.group(1).startswith(in_fence) else (in_fence or m.group(1))
            continue
        pieces = [line] if in_fence else INLINE.findall(line)
        for code in pieces:
            code = code.split(" #")[0] if in_fence else code   # a shell comment after a command
            for part in re.split(r"&&|;|\|\|", code):
                words = part.strip()
                if re.match(r"^(ctest|\S*tapegrad_tests)(\s|$)", words):
                    found.append((no, words))
    return found


def run(argv: list[str], cwd: str) -> str:
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=120)
    return p.stdout + p.stderr


def count_ctest(words: list[str], build: str) -> int | None:
    """How many tests `ctest words…` would run in build (None: the command selects no test at all)."""
    args, i = ["ctest", "-N"], 1
    while i < len(words):
        w = words[i]
        if w in CTEST_SELECT and i + 1 < len(words):
            args += [w, words[i + 1]]
            i += 2
        elif w in CTEST_VALUE:
            i += 2
        else:
            i += 1
    m = TOTAL.search(run(args, build))
    return int(m.group(1)) if m else None


def count_catch(words: list[str], binary: str, build: str) -> int | None:
    specs = [w for w in words[1:] if not w.startswith("-")]
    m = MATCHING.search(run([binary, "--list-tests", *specs], build))
    return int(m.group(1)) if m else None


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: learn_commands_check.py DOCS_DIR BUILD_DIR", file=sys.stderr)
        return 2
    docs, build = sys.argv[1], sys.argv[2]
    if not os.path.isfile(os.path.join(build, "CTestTestfile.cmake")):
        print(f"error: {build} is not a build directory (no CTestTestfile.cmake)", file=sys.stderr)
        return 2
    binary = os.path.join(build, "tests", "tapegrad_tests")
    failures = checked = skipped = 0
    for name in sorted(os.listdir(docs)):
        if not name.endswith(".md"):
            continue
        path = os.path.join(docs, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for no, command in commands_in(text):
            where = f"{path}:{no}: `{command}`"
            try:
                words = shlex.split(command)
            except ValueError as e:
                print(f"FAIL {where}: cannot parse the command ({e})")
                failures += 1
                continue
            if words[0] == "ctest":
                n = count_ctest(words, build)
            elif os.access(binary, os.X_OK):
                n = count_catch(words, binary, build)
            else:
                print(f"skip {where}: {binary} is not built")
                skipped += 1
                continue
            checked += 1
            if not n:
                print(f"FAIL {where} runs no test — name a test, tag or regex that exists")
                failures += 1
            else:
                print(f"ok   {where} runs {n} test(s)")
    if failures:
        print(f"{failures} of {checked} test command(s) in {docs} run no test")
        return 1
    if checked == 0 and skipped == 0:
        print(f"error: no ctest or tapegrad_tests command found in {docs}")
        return 1
    print(f"{checked} test command(s) in {docs} each run at least one test" +
          (f", {skipped} skipped" if skipped else ""))
    if skipped:
        print("SKIP: tapegrad_tests is not built, its commands were not checked")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())

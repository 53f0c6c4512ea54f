#!/usr/bin/env python3
"""ctest_tally.py — what the test stages of scripts/test.sh ran, in one closing line.

  ctest_tally.py add BUILD_DIR TALLY_FILE   after a ctest run: append its passed/failed/skipped counts and
                                            each skipped test's reason (its "SKIP: ..." line) to TALLY_FILE
  ctest_tally.py report TALLY_FILE          print the skip reasons, grouped, then the closing line
                                            "tests: N passed, N failed, N skipped"

Reads BUILD_DIR/Testing/Temporary/LastTest.log, which ctest writes for every run (each test's output and
verdict). A skip's reason is the first line of its output that starts with "SKIP:"; paths are folded so
that every test skipped for want of ../shared counts under one reason.
"""
import json
import re
import sys
from collections import Counter
from pathlib import Path

VERDICT = re.compile(r'^Test (Passed|Failed|Skipped|Not Run)\b')
# One test's block in LastTest.log: "N/M Testing: NAME" ... "Output:" ... "<end of output>" ... "Test Passed."
BLOCK = re.compile(r'^\d+/\d+ Testing: (?P<name>.*?)\n(?P<body>.*?)(?=^\d+/\d+ Testing: |\Z)', re.S | re.M)


def reason_of(output: str) -> str:
    for line in output.splitlines():
        line = line.strip()
        if line.startswith('SKIP:'):
            reason = line[len('SKIP:'):].strip()
            if '../shared' in reason or '/shared/' in reason:
                return 'needs a reference under ../shared, which is not beside this clone'
            return reason
    return 'no reason printed'


def add(build_dir: str, tally_file: str) -> None:
    log = Path(build_dir) / 'Testing' / 'Temporary' / 'LastTest.log'
    counts = Counter()
    reasons = Counter()
    if log.exists():
        text = log.read_text(errors='replace')
        for m in BLOCK.finditer(text):
            body = m.group('body')
            verdict = next((v.group(1) for line in body.splitlines() if (v := VERDICT.match(line))), None)
            if verdict == 'Passed':
                counts['passed'] += 1
            elif verdict == 'Failed':
                counts['failed'] += 1
            elif verdict in ('Skipped', 'Not Run'):
                counts['skipped'] += 1
                out = body.split('Output:', 1)[-1].split('<end of output>', 1)[0]
                reasons[reason_of(out)] += 1
    with open(tally_file, 'a') as f:
        f.write(json.dumps({'dir': build_dir, 'counts': counts, 'reasons': reasons}) + '\n')


def report(tally_file: str) -> None:
    counts, reasons = Counter(), Counter()
    path = Path(tally_file)
    for line in (path.read_text().splitlines() if path.exists() else []):
        entry = json.loads(line)
        counts.update(entry['counts'])
        for reason, n in entry['reasons'].items():
            reasons[f"{reason} ({entry['dir']})"] += n
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f'skipped {n}: {reason}')
    print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'add':
        add(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == 'report':
        report(sys.argv[2])
    else:
        sys.exit('usage: ctest_tally.py add BUILD_DIR TALLY_FILE | report TALLY_FILE')

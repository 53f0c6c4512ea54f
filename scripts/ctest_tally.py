#!/usr/bin/env python3
"""ctest_tally.py — what the test stages of scripts/test.sh ran, in one closing line.

  ctest_tally.py add BUILD_DIR CTEST_OUTPUT TALLY_FILE
                                            after a ctest run: append its passed/failed/skipped counts (from
                                            ctest's own summary in CTEST_OUTPUT) and each skipped test's
                                            reason (its "SKIP: ..." line) to TALLY_FILE
  ctest_tally.py report TALLY_FILE          print the skip reasons, grouped, then the closing line
                                            "tests: N passed, N failed, N skipped"

The counts come from ctest's summary ("N% tests passed, F tests failed out of T" and the list "The following
tests did not run: ... (Skipped)"); a skipped test's reason from its output in
BUILD_DIR/Testing/Temporary/LastTest.log (which records a skip as "Test Passed." with its output): the
first line that starts with "SKIP:"; paths are folded so that every test skipped for want of ../shared
counts under one reason.
"""
import json
import re
import sys
from collections import Counter
from pathlib import Path

SUMMARY = re.compile(r'tests passed, (\d+) tests? failed out of (\d+)')
NOT_RUN = re.compile(r'^\s*\d+ - (?P<name>.*) \((?P<why>Skipped|Not Run|Disabled)\)\s*$')
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


def add(build_dir: str, ctest_output: str, tally_file: str) -> None:
    text = Path(ctest_output).read_text(errors='replace') if Path(ctest_output).exists() else ''
    counts, reasons = Counter(), Counter()
    summary = SUMMARY.findall(text)
    skipped_names = [m.group('name') for line in text.splitlines() if (m := NOT_RUN.match(line))]
    if summary:
        failed, total = map(int, summary[-1])
        counts['failed'] = failed
        counts['skipped'] = len(skipped_names)
        counts['passed'] = total - failed - len(skipped_names)
    log = Path(build_dir) / 'Testing' / 'Temporary' / 'LastTest.log'
    outputs = {}
    if log.exists():
        for m in BLOCK.finditer(log.read_text(errors='replace')):
            body = m.group('body')
            outputs[m.group('name')] = body.split('Output:', 1)[-1].split('<end of output>', 1)[0]
    for name in skipped_names:
        reasons[reason_of(outputs.get(name, ''))] += 1
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
    if len(sys.argv) == 5 and sys.argv[1] == 'add':
        add(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == 'report':
        report(sys.argv[2])
    else:
        sys.exit('usage: ctest_tally.py add BUILD_DIR CTEST_OUTPUT TALLY_FILE | report TALLY_FILE')

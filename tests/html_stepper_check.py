#!/usr/bin/env python3
"""html_stepper_check.py — the page `tapegrad dot --html` writes, run in a real headless Chromium.

Usage: html_stepper_check.py TAPEGRAD_TOOL WORK_DIR

The tool writes the README's first example twice: as DOT with every node's value and gradient
(--values) and as the backward-stepping page (--html). Chromium loads the page at #step=0, #step=2
and the last step (--dump-dom prints the DOM after the page's script ran), and the check reads what
the page shows against the DOT labels:
  step 0     the root entry is highlighted and holds "grad 1" (dL/dL = 1);
  step 2     the second entry backward runs is highlighted, the panel shows the gradient it received
             (its DOT grad), and its input entry now shows exactly the gradient it passed (that
             input's DOT grad: it has no other consumer);
  last step  the oldest entry is highlighted and the leaves w and b show their final .grad;
  every step in a 1400×1000 window: every node is seen whole (the body's data-clipped is empty: the top
             leaf used to be cut off) and no red label covers a node or another label (data-overlaps 0),
             and each input that got a gradient has its "why:" line, the entry's local rule.
Exits 77 (ctest: Skipped) with one line when no Chromium is installed, unless TAPEGRAD_REQUIRE_BROWSER=1.
"""
import html.parser
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dot_nodes(dot_text):
    """DOT node id -> the lines of its label ("#3 squeeze", "[4] float32", "data ...", "grad ...")."""
    nodes = {}
    for m in re.finditer(r'^\s*(\w+) \[[^\n]*label="((?:[^"\\]|\\.)*)"\];$', dot_text, re.M):
        label = m.group(2).replace('\\"', '"')
        lines = [l for l in re.split(r"\\[nl]", label) if l]
        nodes[m.group(1)] = lines
    return nodes


def grad_lines(label_lines):
    """The "grad ..." lines of a DOT label (the first one and its continuation lines)."""
    out, inside = [], False
    for line in label_lines:
        if line.startswith("grad "):
            inside = True
        elif line.startswith("data "):
            inside = False
        if inside:
            out.append(line)
    return out


def norm(lines):
    return " ".join(" ".join(lines).split())


class Dom(html.parser.HTMLParser):
    """Text by element id, plus the node groups' classes and titles."""

    def __init__(self):
        super().__init__()
        self.text = {}       # id -> text content
        self.groups = []     # (class, data-title) of each <g class="node ...">
        self.body_step = None
        self.body = {}       # the body's attributes
        self._open = []      # stack of (tag, id or None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body_step = a.get("data-step")
            self.body = a
        if tag == "g" and "node" in (a.get("class") or "").split():
            self.groups.append((a.get("class"), a.get("data-title")))
        ident = a.get("id")
        if ident is not None:
            self.text[ident] = ""
        self._open.append((tag, ident))

    def handle_endtag(self, tag):
        while self._open:
            t, _ = self._open.pop()
            if t == tag:
                break

    def handle_data(self, data):
        for _, ident in self._open:
            if ident is not None:
                self.text[ident] += data + " "


def load(browser, page, step):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
           "--window-size=1400,1000", "--hide-scrollbars", "--dump-dom",
           f"file://{page}#step={step}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or "<body" not in r.stdout:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}")
    dom = Dom()
    dom.feed(r.stdout)
    if "data-clipped" not in dom.body or "data-overlaps" not in dom.body:
        fail(f"step {step}: the page does not report its layout (the body's data-clipped, data-overlaps)")
    if dom.body.get("data-clipped"):
        fail(f"step {step}: at 1400x1000 the page cuts off {dom.body['data-clipped']}")
    if dom.body.get("data-overlaps") != "0":
        fail(f"step {step}: {dom.body['data-overlaps']} red label(s) cover a node or another label")
    return dom


def current_title(dom):
    cur = [title for cls, title in dom.groups if "current" in cls.split()]
    if len(cur) != 1:
        fail(f"expected one highlighted node, found {cur}")
    return cur[0]


def grad_shown(dom, title):
    """The gradient text the page shows on the node titled `title`."""
    for i, (_, t) in enumerate(dom.groups):
        if t == title:
            return " ".join(dom.text.get(f"grad-{i}", "").split())
    fail(f"no node titled {title!r} on the page")


def main():
    if len(sys.argv) != 3:
        fail("usage: html_stepper_check.py TAPEGRAD_TOOL WORK_DIR")
    tool, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    dot_path, page = os.path.join(work, "example.dot"), os.path.join(work, "stepper.html")
    r = subprocess.run([tool, "dot", "--values", "--out", dot_path, "--html", page], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"tapegrad dot exited {r.returncode}: {r.stderr}")
    with open(dot_path, encoding="utf-8") as f:
        nodes = dot_nodes(f.read())
    ops = sorted((int(k[2:]), v) for k, v in nodes.items() if re.fullmatch(r"op\d+", k))
    if len(ops) < 3:
        fail(f"expected the example's tape entries in the DOT, got {sorted(nodes)}")
    backward = [(seq, lines) for seq, lines in reversed(ops)]  # the order backward runs them
    leaves = {v[0]: v for k, v in nodes.items() if k.startswith("leaf_")}
    for name in ("w", "b"):
        if name not in leaves or not grad_lines(leaves[name]):
            fail(f"the DOT has no gradient for the leaf {name}: {leaves}")

    browser = find_browser()
    if browser is None:
        if os.environ.get("TAPEGRAD_REQUIRE_BROWSER") == "1":
            fail("no chromium binary found and TAPEGRAD_REQUIRE_BROWSER=1 (apt-get install chromium)")
        print("SKIP: no chromium binary found (scripts/deps.sh --test installs Debian's chromium)")
        sys.exit(77)

    last = len(backward)
    # step 0: before backward, the root holds dL/dL = 1
    dom = load(browser, page, 0)
    root_title = backward[0][1][0]
    if dom.body_step != "0" or current_title(dom) != root_title:
        fail(f"step 0: expected the root {root_title!r} highlighted, got {current_title(dom)!r}")
    if grad_shown(dom, root_title) != "grad 1":
        fail(f"step 0: the root shows {grad_shown(dom, root_title)!r}, expected 'grad 1'")
    if "before backward" not in dom.text["step-title"]:
        fail(f"step 0: title {dom.text['step-title']!r}")

    # step 2: the second entry runs; what it passed to its input entry is that input's whole gradient
    dom = load(browser, page, 2)
    seq, lines = backward[1]
    title = lines[0]
    if current_title(dom) != title or title not in dom.text["step-title"]:
        fail(f"step 2: expected {title!r} highlighted, got {current_title(dom)!r} / {dom.text['step-title']!r}")
    received = norm(grad_lines(lines))[len("grad "):]
    if received not in " ".join(dom.text["step-detail"].split()):
        fail(f"step 2: the panel does not show the gradient {title} received ({received}): {dom.text['step-detail']!r}")
    input_seq, input_lines = backward[2]
    shown = grad_shown(dom, input_lines[0])
    if shown != norm(grad_lines(input_lines)):
        fail(f"step 2: {input_lines[0]} shows {shown!r}, the DOT says {norm(grad_lines(input_lines))!r}")
    if "why: grad" not in dom.text["step-detail"]:
        fail(f"step 2: the panel does not say why (the local rule): {dom.text['step-detail']!r}")
    if grad_shown(dom, leaves["w"][0]) != "grad (nothing yet)":
        fail(f"step 2: w already shows a gradient: {grad_shown(dom, 'w')!r}")

    for step in range(3, last):  # load() checks the layout of every step
        load(browser, page, step)
    # the last step: the oldest entry ran; the leaves hold their final gradients
    dom = load(browser, page, last)
    if current_title(dom) != backward[-1][1][0]:
        fail(f"step {last}: expected {backward[-1][1][0]!r} highlighted, got {current_title(dom)!r}")
    for name in ("w", "b"):
        if grad_shown(dom, name) != norm(grad_lines(leaves[name])):
            fail(f"step {last}: {name} shows {grad_shown(dom, name)!r}, the DOT says {norm(grad_lines(leaves[name]))!r}")
    print(f"PASS: the stepper shows steps 0, 2 and {last} of {browser}'s page as the DOT labels say "
          f"(w: {grad_shown(dom, 'w')})")


if __name__ == "__main__":
    main()

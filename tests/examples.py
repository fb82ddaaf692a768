# SPDX-License-Identifier: BSD-2-Clause
"""Re-makes docs/examples/ from a real run of the demo (tests/demo.sh):
ptbpf's stderr, the text report, and the report page (`ptbpf report
--html`) rendered by Debian's chromium, headless, as the tests drive it
(tests/browser.py). Run as root after `make all`: `make examples`."""
import os
import subprocess
import sys

from browser import Browser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "examples")
PTBPF = os.path.join(ROOT, "build", "ptbpf")


def main():
    demo = subprocess.run([os.path.join(ROOT, "tests", "demo.sh")], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    if demo.returncode:
        sys.exit("examples: the demo failed:\n" + demo.stdout + demo.stderr)
    with open(os.path.join(OUT, "demo-stderr.txt"), "w") as f:
        f.write(demo.stderr)
    report = [l for l in demo.stdout.splitlines(True) if not l.startswith("demo: ")]
    with open(os.path.join(OUT, "demo-report.txt"), "w") as f:
        f.writelines(report)
    html = os.path.join(ROOT, "build", "demo-report.html")
    subprocess.run([PTBPF, "report", os.path.join(ROOT, "demo.pftrace"), "--html", html,
                    "--force"], check=True, timeout=600)
    with Browser() as b:
        url = b.open(html)
        for view in ("overview", "python"):
            b.eval("document.getElementById('tab-%s').click()" % view)
            # What a reader sees first: the steps table makes the whole
            # page 4,000 pixels tall.
            b.screenshot(os.path.join(OUT, "demo-report-%s.png" % view), height=1000)
        problems = b.problems(url)
    if problems:
        sys.exit("examples: the report page had problems: %s" % problems)
    print("examples: wrote demo-stderr.txt, demo-report.txt, demo-report-overview.png and "
          "demo-report-python.png in", OUT)


if __name__ == "__main__":
    main()

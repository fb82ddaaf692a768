# SPDX-License-Identifier: BSD-2-Clause
"""The soak (tests/soak/soak.py, issue 19) with small counts, on the CPU:
30 attach/detach cycles and 10 daemon windows (two daemons at once, one
per job, as on a shared host) over an MLP job and a two-rank gloo DDP job that check their own results and their own
torch.profiler sessions, a third of the runs killed, interrupted or
stopped at a random moment. No job harmed, no session different from
the job's control, no false message, no unexplained run, nothing left in
the jobs or on the host."""
import json
import os
import subprocess
import sys

from conftest import PTBPF, PYTHON, ROOT

SOAK = os.path.join(ROOT, "tests", "soak", "soak.py")


def test_soak_cycles_and_daemon_windows(tmp_path):
    out = tmp_path / "soak.json"
    argv = [sys.executable, SOAK, "--mode", "both", "--python", PYTHON, "--ptbpf", PTBPF,
            "--device", "cpu", "--jobs", "mlp,ddp", "--untraced", "mlp", "--cycles", "30", "--windows", "10", "--daemons", "2",
            "--kill-fraction", "0.3", "--session-every", "2", "--hang-seconds", "20",
            "--max-seconds", "150", "--work", str(tmp_path / "work"), "--keep",
            "--json", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=420,
                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert out.exists(), r.stdout[-5000:] + r.stderr[-3000:]
    s = json.loads(out.read_text())
    failed = ["%s: %s" % (c["name"], c["detail"]) for c in s["checks"] if not c["ok"]]
    assert not failed, "\n".join(failed) + "\n" + r.stdout[-4000:]
    assert r.returncode == 0, r.stderr[-3000:]
    assert s["cycles"]["total"] == 30 and s["daemon"]["written"] >= 10
    assert s["daemon"]["daemons_at_once"] == 2
    assert sum(j["verdict"]["sessions"] for j in s["jobs"]) > 0
    # The untraced twin: never a cycle's or a daemon's, measured as the others.
    assert not [r for r in s["records"]["cycles"] if r["job"] == "mlp.untraced"]
    assert "mlp.untraced" in s["accumulation"]
    assert s["accumulation"]["mlp"]["rss_tenths"]["n"] > 0
    assert s["cycles"]["rss_steps"]

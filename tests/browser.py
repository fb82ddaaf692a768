# SPDX-License-Identifier: BSD-2-Clause
"""A page in a real browser: Debian's chromium, headless, driven through
the DevTools protocol (python3-websocket). Loads a file, waits until the
page says it is ready, collects what went wrong (console errors, uncaught
exceptions, any network request), takes a screenshot and evaluates
JavaScript in it. A missing chromium or websocket module is an error, not
a skip."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket  # python3-websocket

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1400,1000"]


class Browser:
    def __init__(self, timeout=60):
        assert os.access(CHROMIUM, os.X_OK), "Debian's chromium is needed (tests/install-deps.sh)"
        self.profile = tempfile.mkdtemp(prefix="ptbpf-chromium-")
        self.proc = subprocess.Popen([CHROMIUM] + FLAGS + ["--user-data-dir=" + self.profile,
                                                           "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + timeout
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            assert self.proc.poll() is None, "chromium exited: %s" % self.proc.stderr.read()[-2000:]
            assert time.time() < deadline, "chromium did not start"
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout,
                                              suppress_origin=True)
        self.next_id = 0
        self.events = []
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(domain + ".enable")

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, (method, msg["error"])
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.ws.settimeout(max(0.1, deadline - time.time()))
            self.events.append(json.loads(self.ws.recv()))
        raise AssertionError("no %s within %d s" % (method, timeout))

    def open(self, path, ready="document.body && document.body.dataset.ready === '1'"):
        url = "file://" + os.path.abspath(path)
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        deadline = time.time() + 60
        while not self.eval(ready):
            assert time.time() < deadline, "the page never got ready: %s" % self.problems()
            time.sleep(0.1)
        return url

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def problems(self, page_url=None):
        """Console errors, uncaught exceptions, failed loads and any request
        for something other than the page itself."""
        self.call("Runtime.evaluate", expression="1")  # drain what is queued
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], [a.get("value", a.get("description"))
                                                           for a in p.get("args", [])]))
            elif m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append("exception: %s" % d.get("exception", {}).get("description", d.get("text")))
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append("log: %s %s" % (p["entry"]["text"], p["entry"].get("url", "")))
            elif m == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if url != page_url and not url.startswith(("data:", "about:")):
                    out.append("request: %s" % url)
            elif m == "Network.loadingFailed":
                out.append("load failed: %s" % p.get("errorText"))
        return out

    def screenshot(self, path, height=None):
        """The page 1400 pixels wide, HEIGHT pixels down (default: all of
        it, up to 6000)."""
        h = height or self.eval("Math.min(document.documentElement.scrollHeight, 6000)")
        self.call("Emulation.setDeviceMetricsOverride", width=1400, height=int(h),
                  deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", format="png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.ws.close()
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

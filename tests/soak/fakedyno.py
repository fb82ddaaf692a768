# SPDX-License-Identifier: BSD-2-Clause
"""The part of dynolog that Kineto's on-demand tracing talks to, so that a
job can be traced on demand by Kineto itself without dynolog installed.

With KINETO_USE_DAEMON=1, libkineto (torch >= 1.13 built with its IPC
fabric, as the pip wheels are) polls a daemon named "dynolog" every
ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS for a trace request: a datagram on a
Unix socket (abstract, or a file in KINETO_IPC_SOCKET_DIR), a 40-byte
header (size_t payload size, char type[32]) then the payload: "ctxt" (a
LibkinetoContext, answered with an int32) or "req" (a LibkinetoRequest:
int type, int n, int64 jobid, int32 pids[n]; answered with a config text,
empty when nothing is asked). This serves one socket file; post() sets
the config text that the next "req" of the traced process gets.

Like dynolog asked for one pid, it answers only that process: every
process with KINETO_USE_DAEMON polls, Inductor's compile workers too (they
inherit the job's environment), and a worker given the job's request
writes an empty trace under its own pid (seen on the H200, 2026-12-04).
"""
import json
import os
import socket
import struct
import tempfile
import threading

HEADER = struct.Struct("=Q32s")


def environment(conf_dir):
    """Kineto's on-demand client, polling every second: what must be in
    the environment before torch is imported. Returns the socket
    directory (the caller removes it)."""
    # Kineto's socket names must fit a sockaddr_un (108 bytes).
    ipc = tempfile.mkdtemp(prefix="ptbpf-od-ipc-", dir="/tmp")
    conf = os.path.join(conf_dir, "kineto.conf")
    with open(conf, "w") as f:
        f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
    os.environ.update(KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=ipc, KINETO_CONFIG=conf)
    return ipc


def written_trace(base):
    """The trace Kineto wrote for ACTIVITIES_LOG_FILE=base.json in this
    process (Kineto may add _PID before .json), parsed; None while there is
    none, or it is still being written."""
    for path in (base + ".json", "%s_%d.json" % (base, os.getpid())):
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    return json.load(fh)
            except ValueError:  # still being written
                return None
    return None


class FakeDynolog:
    # The asker's pid: a "req" payload's pids[0], after type, n and jobid.
    ASKER = HEADER.size + struct.calcsize("=iiq")

    def __init__(self, socket_dir):
        self.pid = os.getpid()  # the process traced on demand: the one serving
        self.path = os.path.join(socket_dir, "dynolog")
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.lock = threading.Lock()
        self.pending = None
        self.requests = 0       # "req" polls seen
        self.contexts = 0       # "ctxt" registrations seen
        self.served = 0         # configs handed out
        self.errors = []
        threading.Thread(target=self._serve, name="fake-dynolog", daemon=True).start()

    def post(self, config_text):
        with self.lock:
            self.pending = config_text

    def request_trace(self, base, iterations, roundup, trace_id):
        """A trace of iterations optimizer steps, from the next multiple of
        roundup, written to base.json (or base_PID.json)."""
        self.post("ACTIVITIES_ENABLED=true\nPROFILE_START_ITERATION=0\n"
                  "PROFILE_START_ITERATION_ROUNDUP=%d\nACTIVITIES_ITERATIONS=%d\n"
                  "ACTIVITIES_WARMUP_ITERATIONS=0\nACTIVITIES_LOG_FILE=%s.json\n"
                  "REQUEST_TRACE_ID=%d\n" % (roundup, iterations, base, trace_id))

    def taken(self):
        with self.lock:
            return self.pending is None

    def _reply(self, kind, payload, to):
        self.sock.sendto(HEADER.pack(len(payload), kind) + payload, to)

    def _asker_is_traced(self, data):
        return (len(data) >= self.ASKER + 4 and
                struct.unpack_from("=i", data, self.ASKER)[0] == self.pid)

    def _serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except OSError as e:
                self.errors.append(str(e))
                return
            if len(data) < HEADER.size or not peer:
                continue
            _, kind = HEADER.unpack_from(data)
            kind = kind.split(b"\0", 1)[0]
            try:
                if kind == b"ctxt":
                    self.contexts += 1
                    self._reply(b"ctxt", struct.pack("=i", 1), peer)
                elif kind == b"req" and not self._asker_is_traced(data):
                    self._reply(b"req", b"", peer)
                elif kind == b"req":
                    self.requests += 1
                    with self.lock:
                        text, self.pending = self.pending, None
                    if text:
                        self.served += 1
                    self._reply(b"req", (text or "").encode(), peer)
            except OSError as e:  # the client went away between poll and answer
                self.errors.append(str(e))

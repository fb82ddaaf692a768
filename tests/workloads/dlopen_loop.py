# SPDX-License-Identifier: BSD-2-Clause
"""A job that loads and unloads a library in a loop (as an import-heavy
job's main thread is in dlopen much of its start), with a torch op every
200 loads. Prints "ready PID", then runs until killed. argv[1]: the
library (one that nothing else in the process holds); argv[2], if given:
a library whose loader_walk_slowly() a second thread calls in a loop (a
dl_iterate_phdr walk that holds the loader's write lock for milliseconds,
so that the main thread's dlopen often waits for it half done)."""
import _ctypes
import ctypes
import os
import sys
import threading

import torch


def walk(lib):
    while True:
        lib.loader_walk_slowly()  # ctypes lets the GIL go


if len(sys.argv) > 2:
    threading.Thread(target=walk, args=(ctypes.CDLL(sys.argv[2]),), daemon=True).start()
x = torch.randn(8, 8)
print("ready", os.getpid(), flush=True)
n = 0
while True:
    _ctypes.dlclose(_ctypes.dlopen(sys.argv[1], os.RTLD_NOW))
    n += 1
    if n % 200 == 0:
        torch.mm(x, x)

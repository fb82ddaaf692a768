# SPDX-License-Identifier: BSD-2-Clause
"""A job that loads and unloads a library in a loop (as an import-heavy
job's main thread is in dlopen much of its start), with a torch op every
200 loads. Prints "ready PID", then runs until killed. argv[1]: the
library (one that nothing else in the process holds)."""
import _ctypes
import os
import sys

import torch

x = torch.randn(8, 8)
print("ready", os.getpid(), flush=True)
n = 0
while True:
    _ctypes.dlclose(_ctypes.dlopen(sys.argv[1], os.RTLD_NOW))
    n += 1
    if n % 200 == 0:
        torch.mm(x, x)

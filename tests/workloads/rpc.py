# SPDX-License-Identifier: BSD-2-Clause
"""One worker of a 2-worker torch.distributed.rpc job (TensorPipe), started
once per rank with RANK, MASTER_ADDR and MASTER_PORT set. Worker 0 prints
"ready", waits for the go file (argv[1]), then makes N (argv[2]) rpc_sync
calls of a builtin op and N rpc_async calls of a Python function on worker
1, prints "done"; both shut down together."""
import os
import sys
import time

import torch
import torch.distributed.rpc as rpc


def add(a, b):
    return a + b


def main():
    rank = int(os.environ["RANK"])
    go, n = sys.argv[1], int(sys.argv[2])
    rpc.init_rpc("w%d" % rank, rank=rank, world_size=2)
    print("ready", flush=True)
    if rank == 0:
        while not os.path.exists(go):
            time.sleep(0.01)
        for _ in range(n):
            rpc.rpc_sync("w1", torch.add, args=(torch.ones(2), torch.ones(2)))
            rpc.rpc_async("w1", add, args=(torch.ones(2), 1)).wait()
        print("done", flush=True)
    rpc.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

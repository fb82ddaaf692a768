# SPDX-License-Identifier: BSD-2-Clause
"""How ptbpf's GPU launch slices compare with torch.profiler's runtime and
driver API records. Used on the GPU machine (tests/gpu) and in CI on traces
recorded there (tests/data/gpu).

Every kernel launch reaches libcuda's cuLaunchKernel/cuLaunchKernelEx
exactly once, whoever makes it: torch's kernels through the shared cudart,
cuBLAS/NCCL through their static cudart, Triton directly. torch.profiler
(CUPTI) records each as one runtime record (cudaLaunchKernel*, static cudart
included) or, when made directly, one driver record (cuLaunchKernel*). So
ptbpf's driver-level launches must equal the profiler's runtime + driver
launch records; likewise for graph launches."""

KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                   "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def base(name):
    return name[:-len("_ptsz")] if name.endswith("_ptsz") else name


def launch_problems(trace, profiler):
    """Differences between the trace's launches and the profiler's counts,
    and launches that are neither in an op nor labelled outside one."""
    anc = trace.ancestors()
    driver = {"kernel": 0, "graph": 0}
    runtime_launches = nested = 0
    problems = []
    for i, s in enumerate(trace.slices):
        name = base(s.name)
        if s.category not in ("cuda_driver", "cuda_runtime") or \
                name not in KERNEL_LAUNCHES + GRAPH_LAUNCHES:
            continue
        cats = [trace.slices[a].category for a in anc[i]]
        if ("cpu_op" in cats) == bool(s.args.get("outside_op")):
            problems.append("launch neither in an op nor labelled outside_op: %s" % (s,))
        if s.category == "cuda_runtime":
            runtime_launches += 1
        else:
            driver["graph" if name in GRAPH_LAUNCHES else "kernel"] += 1
            nested += "cuda_runtime" in cats
    prof = {"kernel": sum(v for k, v in profiler.items() if k in KERNEL_LAUNCHES),
            "graph": sum(v for k, v in profiler.items() if k in GRAPH_LAUNCHES)}
    if driver != prof:
        problems.append("launches: ptbpf %s, torch.profiler %s" % (driver, prof))
    # Each runtime launch of the shared cudart goes on to exactly one driver launch.
    if runtime_launches != nested:
        problems.append("%d cudart launches but %d driver launches inside them" %
                        (runtime_launches, nested))
    return problems

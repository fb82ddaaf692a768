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
launch records; likewise for graph launches. With ops from the agent
(--ops agent), launches come from CUPTI's callbacks as the profiler's do: a
runtime launch then has no driver slice inside, and counts itself."""

KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                   "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def base(name):
    return name[:-len("_ptsz")] if name.endswith("_ptsz") else name


def launch_problems(trace, profiler):
    """Differences between the trace's launches and the profiler's counts,
    and launches that are neither in an op nor labelled outside one."""
    anc = trace.ancestors()
    ours = {"kernel": 0, "graph": 0}
    runtime, nested = {"kernel": 0, "graph": 0}, {"kernel": 0, "graph": 0}
    from_agent = False
    problems = []
    for i, s in enumerate(trace.slices):
        name = base(s.name)
        if s.category not in ("cuda_driver", "cuda_runtime") or \
                name not in KERNEL_LAUNCHES + GRAPH_LAUNCHES:
            continue
        from_agent = from_agent or "correlation" in s.args
        kind = "graph" if name in GRAPH_LAUNCHES else "kernel"
        cats = [trace.slices[a].category for a in anc[i]]
        if ("cpu_op" in cats) == bool(s.args.get("outside_op")):
            problems.append("launch neither in an op nor labelled outside_op: %s" % (s,))
        if s.category == "cuda_runtime":
            runtime[kind] += 1
        else:
            ours[kind] += 1
            nested[kind] += "cuda_runtime" in cats
    # A runtime launch that made no driver launch inside it is a launch too.
    for kind in ours:
        ours[kind] += runtime[kind] - nested[kind]
    prof = {"kernel": sum(v for k, v in profiler.items() if k in KERNEL_LAUNCHES),
            "graph": sum(v for k, v in profiler.items() if k in GRAPH_LAUNCHES)}
    if ours != prof:
        problems.append("launches: ptbpf %s, torch.profiler %s" % (ours, prof))
    # uprobes: each runtime launch of the shared cudart goes on to exactly one
    # driver launch; CUPTI (agent): the driver call of a runtime launch is
    # not recorded.
    if not from_agent and runtime != nested:
        problems.append("%s cudart launches but %s driver launches inside them" %
                        (runtime, nested))
    if from_agent and any(nested.values()):
        problems.append("agent: %s driver launches inside runtime ones" % nested)
    return problems


def short_kernel_name(name):
    """Demanglers of different libstdc++ versions spell template arguments
    and lambdas differently: compare kernel names up to the first '<'."""
    return name.split("<")[0].strip()[:120]


def profiler_kernel_counts(device_json):
    """Kernels per (short) name in a torch.profiler device record dump
    ({name: [count, total]}), without copies, sets and the GPU-side
    record_function regions the profiler also draws there."""
    import json
    with open(device_json) as f:
        device = json.load(f)
    counts = {}
    for name, (count, _) in device.items():
        if not name.startswith(("Memcpy", "Memset", "Optimizer.", "ProfilerStep", "enumerate(")):
            counts[short_kernel_name(name)] = counts.get(short_kernel_name(name), 0) + count
    return counts

// SPDX-License-Identifier: BSD-2-Clause
/*
 * The devices and CUDA versions, told to ptbpf once per session, so that
 * the trace (and its Kineto export) carries what torch.profiler writes as
 * deviceProperties and cupti/cuda versions: the properties occupancy is
 * computed from, under Kineto's own key names.
 *
 * Nothing here initialises CUDA: in a process that has not called cuInit
 * (cuDeviceGetCount says CUDA_ERROR_NOT_INITIALIZED) the agent asks again
 * at its next tick. The agent's own runtime call (cudaRuntimeGetVersion)
 * is marked so that its CUPTI callback does not record it as the job's,
 * and it is made only while the agent holds CUPTI's activity API, under
 * cupti_lock (cupti.c): a job's torch.profiler session records every
 * runtime call of the process, and one of ptbpf's would be in it (seen in
 * the soak as an extra cudaRuntimeGetVersion in 12 of ~500 sessions).
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <stdio.h>

#include <cuda.h>

__thread bool agent_own_cuda_call __attribute__((tls_model("initial-exec")));

/* Kineto's deviceProperties keys and the attributes they come from. */
static const struct {
	const char *key;
	CUdevice_attribute attr;
} attrs[] = {
	{ "computeMajor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR },
	{ "computeMinor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR },
	{ "maxThreadsPerBlock", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK },
	{ "maxThreadsPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR },
	{ "regsPerBlock", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK },
	{ "warpSize", CU_DEVICE_ATTRIBUTE_WARP_SIZE },
	{ "sharedMemPerBlock", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK },
	{ "numSms", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT },
	{ "regsPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR },
	{ "sharedMemPerBlockOptin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN },
	{ "sharedMemPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR },
	{ "reservedSharedMemPerBlock", CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK },
};

struct driver {
	__typeof__(&cuDeviceGetCount) count;
	__typeof__(&cuDeviceGet) get;
	__typeof__(&cuDeviceGetName) name;
	__typeof__(&cuDeviceTotalMem_v2) total_mem;
	__typeof__(&cuDeviceGetAttribute) attr;
	__typeof__(&cuDriverGetVersion) version;
};

static void send_device(const struct driver *drv, int ordinal)
{
	char msg[PTBPF_AGENT_MSG_MAX], name[256] = "";
	size_t total = 0;
	int len, value;
	CUdevice dev;

	if (drv->get(&dev, ordinal) != CUDA_SUCCESS)
		return;
	drv->name(name, sizeof(name), dev);
	drv->total_mem(&total, dev);
	len = snprintf(msg, sizeof(msg), "device properties: device=%d totalGlobalMem=%zu", ordinal,
		       total);
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (drv->attr(&value, attrs[i].attr, dev) == CUDA_SUCCESS && len < (int)sizeof(msg))
			len += snprintf(msg + len, sizeof(msg) - len, " %s=%d", attrs[i].key, value);
	if (len < (int)sizeof(msg))
		snprintf(msg + len, sizeof(msg) - len, " name=%s", name);
	agent_report(PTBPF_AGENT_DEVICE, (uint64_t)ordinal, "%s", msg);
}

static int (*runtime_get_version)(int *);
static int runtime_version; /* 0 until read */

/* The CUDA runtime the job loaded (torch's), if it is visible. Outside
 * cupti_lock: dlopen takes the loader's lock, which a job thread may hold
 * while it calls into CUPTI. */
void cuda_runtime_find(void)
{
	static const char *const libs[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so" };

	if (runtime_get_version)
		return;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]) && !runtime_get_version; i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			runtime_get_version = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
			dlclose(h); /* the job keeps it loaded */
		}
	}
	if (!runtime_get_version)
		runtime_get_version = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
}

void cuda_runtime_read_locked(void)
{
	int v = 0;

	if (runtime_version || !runtime_get_version)
		return;
	agent_own_cuda_call = true;
	if (!runtime_get_version(&v))
		runtime_version = v;
	agent_own_cuda_call = false;
}

bool cuda_props_send(uint32_t cupti_version)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	struct driver drv;
	int n = 0, driver = 0;

	if (!h)
		return true; /* no CUDA: nothing to tell */
	drv = (struct driver){
		.count = (__typeof__(drv.count))dlsym(h, "cuDeviceGetCount"),
		.get = (__typeof__(drv.get))dlsym(h, "cuDeviceGet"),
		.name = (__typeof__(drv.name))dlsym(h, "cuDeviceGetName"),
		.total_mem = (__typeof__(drv.total_mem))dlsym(h, "cuDeviceTotalMem_v2"),
		.attr = (__typeof__(drv.attr))dlsym(h, "cuDeviceGetAttribute"),
		.version = (__typeof__(drv.version))dlsym(h, "cuDriverGetVersion"),
	};
	if (!drv.count || !drv.get || !drv.name || !drv.total_mem || !drv.attr || !drv.version) {
		dlclose(h);
		return true;
	}
	/* Not initialised yet (the job has not touched CUDA): later. */
	if (drv.count(&n) != CUDA_SUCCESS) {
		dlclose(h);
		return false;
	}
	drv.version(&driver);
	agent_report(PTBPF_AGENT_VERSIONS, 0,
		     "cuda versions: cupti_version=%u cuda_runtime_version=%d cuda_driver_version=%d",
		     cupti_version, runtime_version, driver);
	for (int i = 0; i < n; i++)
		send_device(&drv, i);
	dlclose(h);
	return true;
}

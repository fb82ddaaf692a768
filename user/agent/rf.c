// SPDX-License-Identifier: BSD-2-Clause
/*
 * torch's RecordFunction API in the process (rf_abi.h), found once for the
 * agent's two users of it: the op recorder (ops.c) and the step signal
 * (steps.c). libtorch_cpu is loaded RTLD_LOCAL under Python: it is found by
 * name among the loaded objects, and its symbols are looked up in it.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "rf_abi.h"

struct rf_api rfapi;

/* Only copies the name: dl_iterate_phdr holds the loader's write lock,
 * and a dlopen (or dlsym) here takes its load lock, the reverse of the
 * order a concurrent dlopen takes them in (it deadlocked a job that was
 * importing modules while the daemon switched the step signal on). */
static int find_torch(struct dl_phdr_info *info, size_t size, void *ctx)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libtorch_cpu.so", 15))
		return 0;
	snprintf(ctx, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

int rf_resolve(char *why, size_t len)
{
	char path[PATH_MAX] = "";
	void *torch = NULL;
	struct { const char *name; void **slot; } syms[] = {
		{ RF_SYM_ADD, (void **)&rfapi.add }, { RF_SYM_REMOVE, (void **)&rfapi.remove },
		{ RF_SYM_NAME, (void **)&rfapi.name }, { RF_SYM_PEEK, (void **)&rfapi.peek },
	};

	if (rfapi.add)
		return 0;
	dl_iterate_phdr(find_torch, path);
	if (path[0])
		torch = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!torch) {
		snprintf(why, len, "libtorch_cpu.so is not loaded in the process");
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(torch, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(why, len, "libtorch_cpu.so has no %s: a torch without the "
				 "RecordFunction API of 1.13-2.x", syms[i].name);
			rfapi.add = NULL;
			dlclose(torch);
			return -1;
		}
	}
	/* libstdc++'s, through torch's dependencies; without it, frames an
	 * exception unwinds are not marked. */
	rfapi.uncaught = (int (*)(void))dlsym(torch, "_ZSt19uncaught_exceptionsv");
	/* libc10's, through torch's dependencies: an undefined tensor input. */
	rfapi.undefined_tensor = dlsym(torch, "_ZN3c1019UndefinedTensorImpl10_singletonE");
	return 0; /* the handle is kept: torch stays loaded while called */
}

uint64_t rf_add(int stub, void **(*start)(void **, const void *), int end_stub,
		void (*end)(const void *, void *), const int *scopes, int n, bool inputs)
{
	struct rf_callback cb;

	memset(&cb, 0, sizeof(cb));
	cb.start = stub_entry(stub, start);
	cb.end = stub_entry(end_stub, end);
	cb.sampling_prob = 1.0;
	cb.needs_inputs = inputs;
	for (int i = 0; i < n; i++)
		cb.scopes[scopes[i]] = true;
	return rfapi.add(cb);
}

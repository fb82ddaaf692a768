// SPDX-License-Identifier: BSD-2-Clause
/*
 * What an injection checks and looks up before it touches the process with
 * ptrace: the refusals that need no ptrace (preflight), and the runtime
 * addresses of the functions it calls (dlopen and friends). See inject.h.
 */
#include "attach/inject_prep.h"

#include "lib/elfsym.h"
#include "lib/procmaps.h"
#include "attach/target.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The refusals that need no ptrace: one line each. */
int inject_preflight(int pid, const char *lib_path, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	struct stat st;
	int fd, tracer;
	FILE *f;

	if (pid <= 0 || !target_alive(pid)) {
		snprintf(err, errlen, "no live process with pid %d", pid);
		return -ESRCH;
	}
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		int scope = 0;

		if (fscanf(f, "%d", &scope) == 1 && scope >= 2) {
			fclose(f);
			snprintf(err, errlen, "ptrace is not permitted: kernel.yama.ptrace_scope "
				 "is %d (%s)", scope, scope == 3 ? "no ptrace at all" :
				 "CAP_SYS_PTRACE only");
			return -EPERM;
		}
		fclose(f);
	}
	/* ptbpf itself, still holding a thread that did not stop: inject.c
	 * says so. */
	target_stopped(pid, &tracer);
	if (tracer && tracer != getpid()) {
		snprintf(err, errlen, "pid %d is already traced by pid %d (a debugger or "
			 "strace): detach it first", pid, tracer);
		return -EPERM; /* not -EBUSY: that is "no safe point yet", worth a retry */
	}
	if (!lib_path)
		return 0;
	if (lib_path[0] != '/') {
		snprintf(err, errlen, "library path %s is not absolute", lib_path);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, lib_path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : EINVAL;

		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "library %s is not a readable file in pid %d's mount "
			 "namespace: %s", lib_path, pid, strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

uint64_t inject_loader_state_addr(int pid)
{
	struct target_lib lib;
	struct elf_file *ef;
	uint64_t vaddr, first;
	char why[256];

	if (target_find_lib(pid, "ld-linux-x86-64.so", &lib))
		return 0;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	close(lib.fd);
	if (!ef)
		return 0;
	vaddr = elf_file_object_addr(ef, "_r_debug", NULL);
	/* The load base: where the first mapping's file offset lies. */
	first = elf_file_off_to_vaddr(ef, lib.map_off);
	elf_file_close(ef);
	if (!vaddr || first == UINT64_MAX)
		return 0;
	return lib.map_start - first + vaddr + offsetof(struct r_debug, r_state);
}

int inject_lib_symbols(int pid, const char *lib_prefix, const char *const *syms,
		       uint64_t *addrs, uint64_t *sizes, int n, int *bad)
{
	uint64_t file_off[4];
	struct target_lib lib;
	struct elf_file *ef;
	struct procmaps *m;
	struct procmap e;
	int ret = 0, found = 0;
	char err[256];

	*bad = 0;
	if (n > 4)
		return -E2BIG;
	ret = target_find_lib(pid, lib_prefix, &lib);
	if (ret)
		return ret;
	ef = elf_file_open_exported(lib.fd, err, sizeof(err));
	close(lib.fd);
	if (!ef)
		return -ENOEXEC;
	for (int i = 0; !ret && i < n; i++) {
		struct elf_func fn;

		ret = elf_file_find_func(ef, syms[i], &fn);
		file_off[i] = fn.file_off;
		if (sizes)
			sizes[i] = fn.size;
		addrs[i] = 0;
		*bad = i;
	}
	elf_file_close(ef);
	if (ret)
		return ret;
	/* The mapping of that inode whose file range holds each symbol. */
	if (!(m = procmaps_open(pid)))
		return -errno;
	while (found < n && procmaps_next(m, &e)) {
		if (e.inode != lib.ino || e.dev != lib.dev || e.perms[2] != 'x')
			continue;
		for (int i = 0; i < n; i++) {
			if (addrs[i] || file_off[i] < e.offset ||
			    file_off[i] >= e.offset + (e.end - e.start))
				continue;
			addrs[i] = e.start + (file_off[i] - e.offset);
			found++;
		}
	}
	procmaps_close(m);
	for (int i = 0; i < n; i++)
		if (!addrs[i]) {
			*bad = i;
			return -ENOENT;
		}
	return 0;
}

int inject_resolve(int pid, const char *const *syms, uint64_t *addrs, int n, char *err,
		   size_t errlen)
{
	int bad, rc = inject_lib_symbols(pid, "libc.so.6", syms, addrs, NULL, n, &bad);

	if (rc)
		snprintf(err, errlen, "pid %d: cannot find %s in its libc.so.6 (glibc >= 2.34 "
			 "needed): %s", pid, syms[bad], strerror(-rc));
	return rc;
}


/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Python stacks (--py-stacks): finding a traced process's CPython (3.10 to
 * 3.13) and its layout, which the BPF side walks (bpf/pystack.bpf.h), and
 * naming the frames it sends: each code object is read once from the
 * process (file name, qualified name, line table) and each frame's line
 * computed from its instruction position.
 */
#ifndef PTBPF_PYSTACK_H
#define PTBPF_PYSTACK_H

#include <stddef.h>
#include <stdint.h>

#include "ptbpf_events.h"

struct pystack;

struct pystack *pystack_new(void);
void pystack_free(struct pystack *ps);
/* Finds pid's interpreter (a libpython3.X or python3.X mapped by it that
 * defines _PyRuntime) and fills *out for py_procs. 0, or -errno with a
 * one-line reason in err (-ENOENT: no Python in the process). */
int pystack_find(struct pystack *ps, int pid, struct ptbpf_py_proc *out, char *err,
		 size_t errlen);
/* Where pid's CPython keeps _PyRuntime (the main interpreter's GIL, whose
 * lock and condition variable are the futexes a thread waiting for it
 * blocks on, lies inside it in 3.10 to 3.13): 0, or -1 if pid maps none. */
int pystack_runtime(int pid, uint64_t *start, uint64_t *size);
/* An EV_PY_CODE record: a code object's names, read by BPF while alive. */
void pystack_code(struct pystack *ps, const struct ptbpf_py_code *c, size_t size);
/* The frames of an EV_PY_STACK record (size bytes), innermost first, as
 * "file(line): qualname" lines joined by '\n' into buf. Returns the
 * number of frames written. */
int pystack_format(struct pystack *ps, const struct ptbpf_py_stack *s, size_t size, char *buf,
		   size_t len);

/* One frame of process pid as "file(line): qualname" into buf; 0, or -1
 * if it cannot be named (buf then ""). */
int pystack_frame_name(struct pystack *ps, int pid, const struct ptbpf_py_frame *f, char *buf,
		       size_t len);

/* The Python stack of thread tid of pid, read from the process now (for
 * a thread blocked in a call, whose frames hold still), innermost first, as
 * pystack_format writes it. The number of frames; 0: none (not a Python
 * thread, Python 3.10, whose thread states do not name the kernel's
 * thread, pystack_find not run for pid, or the frames changed under the
 * read). */
int pystack_thread(struct pystack *ps, int pid, int tid, char *buf, size_t len);

/* A line from a line table (-1: no line there). 3.10's co_linetable and a
 * byte offset (f_lasti * 2); 3.11+'s location table and an index in
 * 2-byte code units. */
int pystack_line_310(const uint8_t *t, size_t n, int firstlineno, int lasti_bytes);
int pystack_line_311(const uint8_t *t, size_t n, int firstlineno, int instr);

#endif /* PTBPF_PYSTACK_H */

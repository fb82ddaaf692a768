// SPDX-License-Identifier: BSD-2-Clause
/*
 * torch.compile's regions (--compiled-regions): "## Call CompiledFxGraph
 * <key> ##", "Pregraph bytecode", "AOTDispatcher Runtime Wrapper
 * Prologue" and one region per Triton launch, named as torch.profiler
 * names them. torch makes them only while the Python flag
 * torch.autograd.profiler._is_profiler_enabled is set, as
 * torch._C._profiler._RecordFunctionFast contexts that record only into
 * a C++ profiler's session; RecordFunction callbacks never see them.
 *
 * So, in the job's main thread (one of Python's pending calls, which run
 * there between two bytecodes, with the GIL), the agent puts in a
 * stand-in for _RecordFunctionFast and sets the flag to a value of its
 * own (an int 1 that is not True). The stand-in decides when a region
 * is entered, and gives the job what it gets without ptbpf:
 *   - the flag is not ptbpf's (True: the job's torch.profiler, emit_nvtx...
 *     set it; or ptbpf is gone and torch kept a stand-in): torch's own
 *     context, which records into that session (and into the agent's,
 *     through its RecordFunction callbacks);
 *   - the flag is ptbpf's, and a C++ profiler of this thread runs without
 *     it: nothing (without ptbpf, no region was made);
 *   - the flag is ptbpf's otherwise (no profiler, or Kineto's on-demand
 *     trace, which is process-wide and sees no region without the flag):
 *     a region that only the agent's op rings get, through two Python
 *     functions whose code is the agent's (reached through stubs).
 * When the job's session ends, torch sets the flag back to False through
 * _set_is_profiler_enabled: the stand-in's wrapper of it sets ptbpf's
 * value again. When ops stop, another pending call (libpython's
 * PyRun_SimpleString on a text in the stub pages: no code of the agent's)
 * puts torch's objects and the flag back.
 *
 * Everything Python keeps a pointer to (the method definitions, the
 * restoring text) is in the stub pages, which outlive the library; the
 * functions' stubs end in PyObject_Type(self) once it is gone, a new
 * reference their callers drop, so a region still open at detach ends
 * harmlessly.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define PY_FILE_INPUT 257
#define METH_FASTCALL 0x0080

/* PyMethodDef, as every CPython 3 has it. */
struct py_method {
	const char *name;
	void *meth;
	int flags;
	const char *doc;
};

/* The stub pages' Python area. */
struct py_keep {
	struct py_method begin, end;
	char begin_name[32], end_name[32];
	char restore[512];
};
_Static_assert(sizeof(struct py_keep) <= STUB_PY_AREA, "Python's area is too small");

static struct {
	int (*add_pending)(int (*fn)(void *), void *arg);
	void *(*run)(const char *src, int start, void *globals, void *locals);
	void *(*dict_new)(void);
	int (*dict_set)(void *dict, const char *key, void *value);
	void *(*dict_get)(void *dict, const char *key);
	void *(*function_new)(struct py_method *def, void *self, void *module);
	const char *(*utf8)(void *str, ssize_t *len);
	void (*err_clear)(void);
	void (*incref)(void *obj);
	void (*decref)(void *obj);
} py;

/* Run by PyRun_SimpleString (stubs_py_run) in __main__'s dictionary: binds
 * no name there. A Ctrl-C that lands in it is handed back to the job. */
static const char restore_src[] =
	"try:\n"
	"    __import__('sys').modules['torch.autograd.profiler']._ptbpf_restore()\n"
	"except KeyboardInterrupt:\n"
	"    __import__('_thread').interrupt_main()\n"
	"    __import__('sys').modules['torch.autograd.profiler']._ptbpf_restore()\n"
	"except BaseException:\n"
	"    pass\n";

/* Run in a dictionary of its own that holds begin and end; sets result:
 * "on", "wait" (torch not imported yet, or being imported: the pending
 * call ran between two bytecodes of `import torch`) or why not. The
 * stand-in decides at __enter__, not when it is made: torch 2.2's Triton
 * launchers make theirs once, when the kernel is compiled, and keep it. A
 * forked child (whose flag and stand-in are ptbpf's) puts torch's back at
 * its first region. restore is in place before anything is changed. */
static const char install_src[] =
	"def _install():\n"
	"    import sys\n"
	"    P = sys.modules.get('torch.autograd.profiler')\n"
	"    torch = sys.modules.get('torch')\n"
	"    if P is None or torch is None or any(getattr(getattr(m, '__spec__', None),\n"
	"                                                 '_initializing', False) for m in (P, torch)):\n"
	"        return 'wait'\n"
	"    C = getattr(torch._C, '_profiler', None)\n"
	"    RF = getattr(C, '_RecordFunctionFast', None)\n"
	"    cpp_on = getattr(torch._C._autograd, '_profiler_enabled', None)\n"
	"    orig_set = getattr(P, '_set_is_profiler_enabled', None)\n"
	"    if RF is None or cpp_on is None or orig_set is None:\n"
	"        return 'torch %s makes no compiled regions (2.2 and later do)' % torch.__version__\n"
	"    old = getattr(P, '_ptbpf_restore', None)\n"
	"    if old is not None:\n"
	"        old()\n"
	"    import contextlib, os, _thread\n"
	"    on = type('ptbpf_profiler_flag', (int,), {'__slots__': ()})(1)\n"
	"    null = contextlib.nullcontext()\n"
	"    pid, getpid, ident = os.getpid(), os.getpid, _thread.get_ident\n"
	"    class Region:\n"
	"        __slots__ = ('a', 'k', 'n', 'inner')\n"
	"        def __init__(self, *a, **k):\n"
	"            n = a[0] if a else k.get('name', '')\n"
	"            self.a, self.k, self.inner = a, k, None\n"
	"            self.n = n if type(n) is str else str(n)\n"
	"        def __enter__(self):\n"
	"            if P._is_profiler_enabled is on and getpid() == pid:\n"
	"                if not cpp_on():\n"
	"                    begin(self, self.n)\n"
	"                    return\n"
	"                begin(null)\n"
	"                rf = null\n"
	"            else:\n"
	"                if getpid() != pid:\n"
	"                    restore()\n"
	"                rf = RF(*self.a, **self.k)\n"
	"                rf.__enter__()\n"
	"            if self.inner is None:\n"
	"                self.inner = {}\n"
	"            self.inner[ident()] = rf\n"
	"        def __exit__(self, *e):\n"
	"            rf = self.inner.pop(ident(), None) if self.inner else None\n"
	"            if rf is None:\n"
	"                end(self)\n"
	"            elif rf is not null:\n"
	"                rf.__exit__(*e)\n"
	"    def set_enabled(enable):\n"
	"        orig_set(enable)\n"
	"        if not enable and getpid() == pid:\n"
	"            P._is_profiler_enabled = on\n"
	"    def restore():\n"
	"        g = globals()\n"
	"        g['begin'] = g['end'] = lambda *a: None\n"
	"        if getattr(C, '_RecordFunctionFast', None) is Region:\n"
	"            C._RecordFunctionFast = RF\n"
	"        if getattr(P, '_set_is_profiler_enabled', None) is set_enabled:\n"
	"            P._set_is_profiler_enabled = orig_set\n"
	"        if P._is_profiler_enabled is on:\n"
	"            P._is_profiler_enabled = False\n"
	"        P.__dict__.pop('_ptbpf_restore', None)\n"
	"    P._ptbpf_restore = restore\n"
	"    C._RecordFunctionFast = Region\n"
	"    P._set_is_profiler_enabled = set_enabled\n"
	"    if not P._is_profiler_enabled:\n"
	"        P._is_profiler_enabled = on\n"
	"    return 'on'\n"
	"try:\n"
	"    result = _install()\n"
	"except KeyboardInterrupt:\n"
	"    __import__('_thread').interrupt_main()\n"
	"    result = 'failed: interrupted (the Ctrl-C was handed back to the job)'\n"
	"except BaseException as e:\n"
	"    result = 'failed: %s: %s' % (type(e).__name__, e)\n"
	"del _install\n";

/* A pending call's argument: what to do, and which load of the agent
 * queued it (pending calls an earlier copy queued reach this one's
 * py_call through the same stub: they are not this one's). */
enum { CALL_INSTALL = 1, CALL_CONFIRM = 2 };
#define CALL(what) ((void *)(uintptr_t)(generation << 2 | (what)))
static uint64_t generation;

static struct py_keep *keep;
static _Atomic bool wanted;          /* between regions_on and regions_off */
static _Atomic bool install_queued;  /* an install waits for the main thread */
static _Atomic bool waiting;         /* the last install found no torch */
static _Atomic bool installed;       /* an install said "on" (a restore to wait for) */
static _Atomic uint64_t confirmed;   /* confirmations run */
static uint64_t queued_confirms;     /* ... and queued (agent thread only) */
static _Atomic uint64_t skipped;     /* regions left to a C++ profiler's thread */
static int64_t retry_at, queued_at;
static bool resolved, said_waiting;

static bool resolve(void)
{
	struct { const char *name; void **slot; } syms[] = {
		{ "Py_AddPendingCall", (void **)&py.add_pending },
		{ "PyRun_String", (void **)&py.run },
		{ "PyDict_New", (void **)&py.dict_new },
		{ "PyDict_SetItemString", (void **)&py.dict_set },
		{ "PyDict_GetItemString", (void **)&py.dict_get },
		{ "PyCFunction_NewEx", (void **)&py.function_new },
		{ "PyUnicode_AsUTF8AndSize", (void **)&py.utf8 },
		{ "PyErr_Clear", (void **)&py.err_clear },
		{ "Py_IncRef", (void **)&py.incref },
		{ "Py_DecRef", (void **)&py.decref },
	};

	if (resolved)
		return true;
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		if (!(*syms[i].slot = dlsym(RTLD_DEFAULT, syms[i].name)))
			return false;
	return resolved = true;
}

/* A new reference to obj (Py_IncRef: right for immortal objects and
 * free-threaded builds too). */
static void *new_ref(void *obj)
{
	py.incref(obj);
	return obj;
}

/* begin(region, name), or begin(null) for a region left to a C++
 * profiler's thread. Returns its first argument. */
static void *py_begin(void *self, void *const *args, ssize_t nargs)
{
	uint8_t *busy = busy_enter();
	ssize_t len = 0;
	const char *name;

	if (nargs == 2 && (name = py.utf8(args[1], &len)))
		agent_ops_region(true, args[0], name, (size_t)len);
	else if (nargs == 2)
		py.err_clear();
	else
		atomic_fetch_add_explicit(&skipped, 1, memory_order_relaxed);
	busy_leave(busy);
	return new_ref(nargs ? args[0] : self);
}

static void *py_end(void *self, void *const *args, ssize_t nargs)
{
	uint8_t *busy = busy_enter();

	if (nargs >= 1)
		agent_ops_region(false, args[0], NULL, 0);
	busy_leave(busy);
	return new_ref(nargs ? args[0] : self);
}

/* In the main thread, with the GIL: puts the stand-in in, unless ops
 * stopped since this was queued. */
static void install(void)
{
	void *g, *b = NULL, *e = NULL, *r, *res;
	const char *msg = NULL;
	char text[300];
	ssize_t len;

	atomic_store(&install_queued, false);
	if (!atomic_load(&wanted))
		return;
	g = py.dict_new();
	if (g) {
		b = py.function_new(&keep->begin, g, NULL);
		e = py.function_new(&keep->end, g, NULL);
	}
	if (!g || !b || !e || py.dict_set(g, "begin", b) || py.dict_set(g, "end", e)) {
		msg = "failed: no memory for its Python objects";
	} else if (!(r = py.run(install_src, PY_FILE_INPUT, g, g))) {
		msg = "failed: its Python code raised";
	} else {
		py.decref(r);
		res = py.dict_get(g, "result");
		msg = res ? py.utf8(res, &len) : NULL;
		if (!msg)
			msg = "failed: no result";
	}
	py.err_clear();
	snprintf(text, sizeof(text), "%s", msg);
	if (b)
		py.decref(b);
	if (e)
		py.decref(e);
	if (g)
		py.decref(g); /* the functions the stand-in keeps keep it */
	atomic_store(&waiting, !strcmp(text, "wait"));
	if (!strcmp(text, "on")) {
		atomic_store(&installed, true);
		agent_report(PTBPF_AGENT_REGIONS, 1, "compiled regions: on (torch.compile's and "
			     "Inductor's regions, as torch.profiler names them)");
	} else if (strcmp(text, "wait"))
		agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: %s", text);
}

static int py_call(void *arg)
{
	uint8_t *busy = busy_enter();

	if ((uintptr_t)arg >> 2 != generation)
		; /* an earlier copy's */
	else if (((uintptr_t)arg & 3) == CALL_INSTALL)
		install();
	else
		atomic_fetch_add(&confirmed, 1);
	busy_leave(busy);
	return 0;
}

static bool queue_install(void)
{
	if (atomic_exchange(&install_queued, true))
		return true;
	queued_at = agent_mono_ns();
	if (!py.add_pending(stub_entry(STUB_PY_CALL, py_call), CALL(CALL_INSTALL)))
		return true;
	atomic_store(&install_queued, false);
	atomic_store(&waiting, true); /* regions_tick tries again */
	return false;
}

void regions_on(void)
{
	if (!generation)
		generation = (uint64_t)agent_mono_ns() & (UINTPTR_MAX >> 3);
	if (!stubs_available() || !resolve() || !(keep = stubs_py_area())) {
		agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: %s",
			     !stubs_available() ? "no stub pages (no executable memory)" :
			     "no Python interpreter in the process");
		return;
	}
	keep->begin = (struct py_method){ keep->begin_name, stub_entry(STUB_PY_BEGIN, py_begin),
					  METH_FASTCALL, NULL };
	keep->end = (struct py_method){ keep->end_name, stub_entry(STUB_PY_END, py_end),
					METH_FASTCALL, NULL };
	snprintf(keep->begin_name, sizeof(keep->begin_name), "ptbpf_region_begin");
	snprintf(keep->end_name, sizeof(keep->end_name), "ptbpf_region_end");
	snprintf(keep->restore, sizeof(keep->restore), "%s", restore_src);
	atomic_store(&skipped, 0);
	said_waiting = false;
	atomic_store(&waiting, false);
	atomic_store(&wanted, true);
	retry_at = agent_mono_ns() + 1000000000LL;
	if (!queue_install())
		agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: Python's queue of pending "
			     "calls is full; trying again every second");
}

/* Where torch was not imported yet, or the queue was full: again once a
 * second. An install the main thread has not run for 2 s is said, once
 * (a job whose main thread waits in C while others train: the regions
 * start when it next runs Python). */
void regions_tick(int64_t now)
{
	if (!atomic_load(&wanted) || now < retry_at)
		return;
	if (atomic_load(&install_queued)) {
		if (!said_waiting && now - queued_at > 2000000000LL)
			agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: waiting for the job's "
				     "main thread, which ran none of Python's pending calls for 2 s "
				     "(they start when it does)");
		said_waiting |= now - queued_at > 2000000000LL;
		return;
	}
	retry_at = now + 1000000000LL;
	if (atomic_load(&waiting))
		queue_install();
}

/*
 * Puts torch's objects back in the main thread, after any install still
 * queued (pending calls run in order). unloading: waits up to 500 ms to
 * see it done, and says so if it was not (the job's main thread ran no
 * Python: it is done when it next does, with no code of the agent's).
 */
void regions_off(bool unloading)
{
	uint64_t n = atomic_exchange(&skipped, 0);
	int64_t until = agent_mono_ns() + 500000000LL;

	if (atomic_exchange(&wanted, false)) {
		if (n)
			agent_report(PTBPF_AGENT_REGIONS, n, "compiled regions: %llu not recorded: a "
				     "C++ profiler without torch.profiler's flag ran on their thread",
				     (unsigned long long)n);
		if (py.add_pending(stubs_py_run(), keep->restore)) {
			if (atomic_load(&installed))
				agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: Python's queue "
					     "of pending calls is full: torch's profiler flag and "
					     "_RecordFunctionFast stay ptbpf's (they record nothing "
					     "once it is gone)");
			return;
		}
		/* Without its confirmation (a full queue) the restore still
		 * runs: only the wait below is not done. */
		if (!py.add_pending(stub_entry(STUB_PY_CALL, py_call), CALL(CALL_CONFIRM)))
			queued_confirms++;
		/* A session that starts before these ran queues its install
		 * after them. */
		atomic_store(&install_queued, false);
	}
	/* An unload (also one after an earlier off) waits for the last, where
	 * something was put in (an install still queued then never runs). */
	if (!unloading || !atomic_load(&installed) || atomic_load(&confirmed) >= queued_confirms)
		return;
	while (atomic_load(&confirmed) < queued_confirms && agent_mono_ns() < until)
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	if (atomic_load(&confirmed) < queued_confirms)
		agent_report(PTBPF_AGENT_REGIONS, 0, "compiled regions: torch's profiler flag and "
			     "_RecordFunctionFast are put back when the job's main thread next runs "
			     "Python's pending calls (it ran none for 500 ms)");
}

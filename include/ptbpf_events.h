/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The event ABI shared by the BPF programs (bpf/) and the loader (user/).
 * Every record in the ring buffer starts with struct ptbpf_event; records
 * of kind EV_NAMED_* are a struct ptbpf_named_event. Fixed-width types only.
 *
 * Frames (ops, backward nodes, user regions) open with a *_BEGIN and close
 * with a *_END carrying the same (tid, key). The key is whatever both sides
 * of a frame can see: the stack pointer at function entry, which equals the
 * stack pointer at its `ret`, or an object address (a RecordFunction*).
 * `source` says which mechanism produced the event, so a begin from one
 * source can be closed by an end from another (e.g. an in-process agent).
 */
#ifndef PTBPF_EVENTS_H
#define PTBPF_EVENTS_H

#ifdef __BPF__
typedef __u8 u8_t;
typedef __u16 u16_t;
typedef __u32 u32_t;
typedef __u64 u64_t;
#else
#include <stdint.h>
typedef uint8_t u8_t;
typedef uint16_t u16_t;
typedef uint32_t u32_t;
typedef uint64_t u64_t;
#endif

enum ptbpf_kind {
	EV_OP_BEGIN = 1,    /* id = op index; key = entry sp */
	EV_OP_END,          /* id = op index; key = sp at a ret site */
	EV_UNWIND,          /* key = sp at __cxa_begin_catch: frames with key <= it were unwound */
	EV_BWD_BEGIN,       /* key = entry sp; arg0 = Node vptr, arg1 = seq, arg2 = fwd logical tid */
	EV_BWD_END,         /* key = sp at a ret site of evaluate_function */
	EV_SEQ,             /* arg0 = sequence number handed to a new autograd Node */
	EV_USER_END,        /* key = RecordFunction* of a record_function region */
	EV_THREAD_EXIT,     /* a thread of a traced process exited */
	EV_PROC_EXIT,       /* the last thread of a traced process exited; arg0 = exit code */
	EV_FORK,            /* arg0 = child pid (a new process, not a thread) */
	EV_GPU_CALL,        /* struct ptbpf_gpu_call: id = GPU API cookie; key = entry sp */
	EV_GPU_RET,         /* id = cookie; key = entry sp; arg0 = return value,
			     * arg1 = the value the call wrote through its out pointer */
	EV_AGENT_CORR,      /* on a launching thread: arg0 = CUPTI correlation id,
			     * arg1 = callback id, arg2 = CUPTI domain */
	EV_AGENT_RECORD,    /* struct ptbpf_agent_event: id = AGENT_REC_* */
	EV_AGENT_DROPPED,   /* CUPTI dropped records: arg0 = since last, arg1 = total */
	EV_RPC,             /* struct ptbpf_rpc (older captures: the bare event):
			     * id = RPC_* (the probe); see there */
	EV_EXEC,            /* --all: pid exec'd (any process) */
	EV_MEM,             /* c10::reportMemoryUsageToProfiler: key = block address,
			     * arg0 = bytes (< 0: a free), arg1 = allocated and
			     * arg2 = reserved bytes on the device after it; id =
			     * c10::Device: type | index << 8 */
	EV_PY_CODE,         /* struct ptbpf_py_code: a code object seen for the first
			     * time in this process: key = its address */
	EV_PY_STACK,        /* struct ptbpf_py_stack: ts = the ts of the op or call
			     * it belongs to; id = frames; arg0 = 1 if more
			     * frames were cut; arg1 = PY_STACK_* status */
	EV_NAMED_USER_BEGIN = 32, /* named: key = RecordFunction* */
	EV_NAMED_NODE_TYPE,       /* named: key = Node vptr; name = mangled typeinfo name */
	EV_NAMED_GPU_NAME,        /* named: id = cookie; key = entry sp; the name a
				   * cuModuleGetFunction-like call looks up */
	EV_NAMED_AGENT_STATUS,    /* struct ptbpf_long_name (a named event in
				   * older captures): arg0 = status code, arg1 =
				   * value; the agent's message */
	EV_LONG_NAME_KERNEL,      /* struct ptbpf_long_name: key = CUPTI's name pointer */
	/* Made by the loader from the agent's op rings (user/record/ops_ring.c),
	 * never by BPF: */
	EV_NAMED_RF_BEGIN,        /* named: key = RecordFunction*; arg0 = sequence
				   * number or -1, arg1 = at::RecordScope */
	EV_RF_END,                /* key = RecordFunction*; arg0 = the thread's
				   * next sequence number at the end, arg1 =
				   * OPS_END_* flags (ptbpf_agent.h) */
	EV_OPS_CHUNK,             /* struct ptbpf_ops_chunk (made by BPF): bytes of
				   * an agent op ring, read as the process calls
				   * _exit, before its memory goes */
	EV_OPS_GAP,               /* the thread lost arg0 op records, arg1 BEGINs
				   * (ops) among them, just before ts (to a
				   * full agent ring, or with its process
				   * before ptbpf read them): its open frames
				   * may have lost their ends */
	EV_OPS_NO_RING,           /* threads of pid found no free agent ring: they
				   * lost arg0 op records, arg1 BEGINs (ops)
				   * among them, since the last such event */
	EV_CPU_SAMPLE,            /* struct ptbpf_cpu_sample: a CPU sample of a
				   * traced thread (bpf/samples.bpf.c) */
	EV_AGENT_WAKE,            /* a thread recorded while its agent idled
				   * (ptbpf_agent_wake): the loader reads the
				   * op rings often again; neither kept nor
				   * counted as sent */
	EV_KIND_MAX, /* (new kinds go last: --raw captures keep the numbers) */
};

enum ptbpf_source {
	SRC_ENTRY_PROBE = 1, /* uprobe at a function's first instruction */
	SRC_RET_PROBE,       /* uprobe on a ret instruction (single-stepped) */
	SRC_CATCH_PROBE,     /* __cxa_begin_catch */
	SRC_CTOR_PROBE,      /* RecordFunction(RecordScope) constructor */
	SRC_END_PROBE,       /* RecordFunction::end */
	SRC_TRACEPOINT,      /* sched tracepoints */
	SRC_AGENT,           /* reserved: the in-process agent */
};

struct ptbpf_event {
	u64_t ts;      /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	u32_t pid;     /* tgid, initial pid namespace */
	u32_t tid;
	u16_t kind;    /* enum ptbpf_kind */
	u8_t source;   /* enum ptbpf_source */
	u8_t pad;
	u32_t id;      /* probe cookie: op index, site index */
	u64_t key;     /* frame match key, see above */
	u64_t arg[3];
};

#define PTBPF_NAME_LEN 112

struct ptbpf_named_event {
	struct ptbpf_event ev;
	char name[PTBPF_NAME_LEN]; /* NUL-terminated, truncated */
};

/*
 * One call into libcuda, libcudart or libamdhip64, as the registers show it
 * at entry; user/record/gpu_calls.c decodes it per API. The cookie (ev.id) is the API's
 * index in user/record/gpu_calls.c's table plus GPU_COOKIE_* flags saying what else the
 * probe reads.
 */
#define GPU_COOKIE_API_MASK 0xffffu
#define GPU_COOKIE_CONFIG   (1u << 16) /* copy 56 bytes at RDI (launch config) */
#define GPU_COOKIE_NAME_RDX (1u << 17) /* a name string at RDX */
#define GPU_COOKIE_OUT_RDI  (1u << 18) /* RDI points to an output read at return */

struct ptbpf_gpu_call {
	struct ptbpf_event ev;
	u64_t reg[6];   /* rdi rsi rdx rcx r8 r9 */
	u64_t stack[3]; /* [rsp+8], [rsp+16], [rsp+24]: stack-passed arguments */
	u32_t config[14];
	/* GPU_COOKIE_CONFIG: the config's first 4 launch attributes (attrs @40,
	 * numAttrs @48, 72 bytes each): id, then the value's first 3 words. */
	u32_t attr[4][4];
};

/*
 * A record of the in-process agent (user/agent/agent.c, include/ptbpf_agent.h),
 * copied raw from the pointer it passes to one of its ptbpf_agent_*
 * functions. The cookie says which record it is and where its kernel-name
 * pointer sits, so the BPF side needs no copy of the agent's layouts.
 */
enum ptbpf_agent_rec {
	AGENT_REC_KERNEL = 1, AGENT_REC_MEMCPY, AGENT_REC_MEMSET, AGENT_REC_GRAPH_NODE,
	AGENT_REC_GRAPH_KEPT,
};
#define AGENT_COOKIE_KIND(c)     ((c) & 0xff)
#define AGENT_COOKIE_NAME_OFF(c) (((c) >> 8) & 0xffff) /* 0: no name pointer */
#define AGENT_RAW_LEN 160

struct ptbpf_agent_event {
	struct ptbpf_event ev;
	u8_t raw[AGENT_RAW_LEN];
};

/* Long names (CUDA kernels' mangled names), sent once per name pointer. */
#define PTBPF_LONG_NAME_LEN 1024

struct ptbpf_long_name {
	struct ptbpf_event ev;
	char name[PTBPF_LONG_NAME_LEN];
};

/* An agent op ring's unread bytes at process exit: tid = the ring's owner,
 * id = ring (slot) index, arg0 = ring position of data[0] (bytes ever
 * written), arg1 = bytes valid. */
#define PTBPF_OPS_CHUNK 4096
#define OPS_CHUNK_DONE  0xffffffffu /* id of the last chunk: no bytes, all copied */

struct ptbpf_ops_chunk {
	struct ptbpf_event ev;
	u8_t data[PTBPF_OPS_CHUNK];
};

/*
 * Where a process's agent keeps its op rings (BPF map ops_rings, by tgid),
 * and their counters as its _exit or exec probe found them (ptbpf writes
 * zeros there): what the agent wrote and dropped, which the process's
 * memory does not outlive, so that what ptbpf could not read before the
 * process went is counted.
 */
#define PTBPF_OPS_RINGS   64 /* = PTBPF_OPS_SLOTS (ptbpf_agent.h) */
#define PTBPF_OPS_HDR_OUT 64 /* bytes of a ring's header the probe keeps:
			      * struct ptbpf_ops_slot up to its tail */

struct ptbpf_ops_loc {
	u64_t slots;      /* address of ring 0 */
	u32_t nslots;
	u32_t slot_bytes; /* header (128 bytes) included */
	u64_t desc;       /* address of the rings' struct ptbpf_ops_desc */
	/* Written by the probe: */
	u64_t final_ts;   /* when it copied what follows; 0: not (yet) */
	u64_t no_slot[2]; /* the descriptor's no_slot and no_slot_begins */
	u8_t hdr[PTBPF_OPS_RINGS][PTBPF_OPS_HDR_OUT]; /* zeros where unreadable */
};

/*
 * Python stacks (--py-stacks): where one traced process's CPython keeps
 * its threads and frames (map py_procs, by tgid), as user/record/pystack.c finds
 * them for its version. A thread is found by its pthread_t (the fs base
 * of the thread the probe fires in) in the interpreter's thread list; its
 * frames are walked innermost first. PY_NO_FIELD: absent in this version.
 */
#define PY_MAX_FRAMES  32
#define PY_MAX_THREADS 1024
#define PY_NO_FIELD    0xffff

struct ptbpf_py_proc {
	u64_t runtime;      /* address of _PyRuntime */
	u16_t interp_head;  /* _PyRuntime.interpreters.head */
	u16_t threads_head; /* PyInterpreterState.threads.head (3.10: tstate_head) */
	u16_t ts_next;      /* PyThreadState.next */
	u16_t ts_thread_id; /* PyThreadState.thread_id (pthread_t) */
	u16_t ts_frame;     /* .frame (3.10), .cframe (3.11, 3.12), .current_frame (3.13+) */
	u16_t cframe_frame; /* _PyCFrame.current_frame (3.11, 3.12) or PY_NO_FIELD */
	u16_t f_back;       /* f_back (3.10) or previous */
	u16_t f_code;       /* f_code, f_executable (3.13+) */
	u16_t f_lasti;      /* f_lasti (3.10, an int), prev_instr, instr_ptr (3.13+) */
	u16_t f_owner;      /* owner (3.12+) or PY_NO_FIELD */
	u8_t owner_cstack;  /* the owner of a C-stack shim frame: skipped */
	u8_t lasti_is_int;  /* 3.10 */
	u32_t every;        /* probes: a stack for one op in `every` (per CPU) */
	/* Code objects, named once each (EV_PY_CODE), while they are alive: */
	u64_t code_type;    /* address of PyCode_Type */
	u16_t co_filename, co_qualname, co_firstlineno, co_linetable;
	u16_t ascii_data;   /* sizeof(PyASCIIObject): a compact ASCII str's text */
	u16_t compact_data; /* sizeof(PyCompactUnicodeObject): compact Latin-1 text */
	u16_t pad2[2];
};

#define PY_FILE_LEN 160
#define PY_NAME_LEN 96
#define PY_LINETABLE_LEN 2048

/* ev.key = the code object; arg0 = co_firstlineno, arg1 = line-table bytes
 * copied, arg2 = its full length (more than copied: lines past the copy
 * show the first line); ev.id bit 0: file is Latin-1, bit 1: name is. */
struct ptbpf_py_code {
	struct ptbpf_event ev;
	char file[PY_FILE_LEN];
	char name[PY_NAME_LEN];
	u8_t linetable[PY_LINETABLE_LEN];
};

struct ptbpf_py_frame {
	u64_t code;  /* PyCodeObject* */
	u64_t lasti; /* f_lasti (3.10) or the instruction pointer (3.11+) */
};

enum { PY_STACK_OK = 0, PY_STACK_NO_THREAD, PY_STACK_NO_FRAME };

struct ptbpf_py_stack {
	struct ptbpf_event ev;
	struct ptbpf_py_frame f[PY_MAX_FRAMES]; /* ev.id of them are sent */
};

/*
 * A CPU sample (EV_CPU_SAMPLE) of a traced thread, taken by a perf_event
 * program on each CPU's cpu-clock (bpf/samples.bpf.c): ev.ts is the
 * sample's time, ev.key the CPU, ev.id the Python frames in f (innermost
 * first), arg0 = 1 if more Python frames were cut, arg1 = PY_STACK_* (or
 * SAMPLE_NO_PYTHON: no interpreter layout for the process), arg2 = the
 * native frames in ips (the user stack by frame pointers, leaf first: the
 * leaf is the exact pc, the callers only where frame pointers are kept).
 * Sent at its real size: f is cut to ev.id frames.
 */
#define SAMPLE_NATIVE_MAX 64
#define SAMPLE_NO_PYTHON 0xff

struct ptbpf_cpu_sample {
	struct ptbpf_event ev;
	u64_t ips[SAMPLE_NATIVE_MAX];
	struct ptbpf_py_frame f[PY_MAX_FRAMES];
};

/* Why a record did not reach the ring, or was counted; index of the
 * per-CPU `stats` array. */
enum ptbpf_stat {
	STAT_SENT = 0,          /* every record a program tried to emit */
	STAT_DROP_RINGBUF_FULL, /* bpf_ringbuf_reserve failed for an event */
	STAT_DROP_NAME_FULL,    /* ... for a named event */
	STAT_NAME_FAULT,        /* a name could not be read (page not present) */
	STAT_USER_PENDING_FULL, /* record_function map full: end not matched */
	STAT_DROP_GPU_FULL,     /* bpf_ringbuf_reserve failed for a GPU call */
	STAT_DROP_AGENT_FULL,   /* ... for an agent (device timeline) record */
	STAT_DROP_OPS_EXIT,     /* ... for op-ring bytes read at process exit */
	STAT_DROP_PY_STACK,     /* ... for a Python stack */
	STAT_DROP_PY_CODE,      /* ... for a code object's names */
	STAT_DROP_RPC_FULL,     /* ... for a torch.distributed.rpc record */
	STAT_DROP_CPU_SAMPLE,   /* ... for a CPU sample (or its scratch was missing) */
	STAT_MAX,
};

/*
 * torch.distributed.rpc (TensorPipe agent), entry probes only (bpf/rpc.bpf.h,
 * placed by user/attach/rpc_probes.c). ev.id says which function; ev.key is
 * the object it concerns (the Message, or the response's future); arg0 =
 * MessageType, arg1 = message id (-1: none yet), arg2 = payload bytes, where
 * the function has a message; INC/DEC: arg0 = the counter's offset in the
 * agent; UNTIMEOUT: arg1 = the message id.
 */
enum ptbpf_rpc_probe {
	RPC_SEND = 1,     /* TensorPipeAgent::pipeWrite: a request or response
			   * goes out; name = the agent's own worker name */
	RPC_RECEIVE,      /* RequestCallback::operator(): a request taken up */
	RPC_CALL,         /* TensorPipeAgent::send: a request made (no id yet);
			   * name = its destination; a Python stack comes first */
	RPC_LOOKUP,       /* TensorPipeAgent::getWorkerInfo(name): Python's
			   * rpc_sync/rpc_async/remote begin with it */
	RPC_RESPONSE,     /* markFutureAsComplete: a response arrived */
	RPC_COMPLETING,   /* Message::getStorages: a pool thread is about to
			   * complete the response's future */
	RPC_DONE,         /* (no longer probed: decreaseCallCount, after the
			   * future's callbacks; kept for --raw captures) */
	RPC_BUSY,         /* increaseCallCount: e.g. a request handler returned */
	RPC_FAIL,         /* markFutureWithError; payload = the error's text */
	RPC_UNTIMEOUT,    /* removeFromTimeoutMap(id): a call's end was seen */
	RPC_CLIENT_ERROR, /* handleClientError: a connection failed, its
			   * pending calls fail next */
	RPC_AUTOGRAD_SEND, /* DistEngine::executeSendFunctionAsync: a backward
			   * pass goes on here from its SendRpcBackward node;
			   * arg0 = the node's sequence number */
	RPC_PROBES,       /* (the number of probes + 1) */
};

#define RPC_NAME_LEN    48
#define RPC_PAYLOAD_LEN 512

struct ptbpf_rpc {
	struct ptbpf_event ev;
	u32_t tensors;  /* the message's tensors */
	u32_t copied;   /* bytes of payload[] filled */
	char name[RPC_NAME_LEN];      /* a worker name (see the probes), truncated */
	u8_t payload[RPC_PAYLOAD_LEN]; /* the payload's first bytes */
};

/* Cookie bit layout for the op/ret uprobe.multi links: the op index. */
#define PTBPF_MAX_OPS (1u << 20)

#endif /* PTBPF_EVENTS_H */

/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ABI between the in-process agent (libptbpf-agent.so, user/agent/agent.c)
 * and ptbpf's uprobes (bpf/agent.bpf.c). The agent has no channel of its
 * own: it calls the out-of-line ptbpf_agent_* functions below, and the
 * uprobes on them copy the arguments (and the record a pointer argument
 * names) into ptbpf's ring buffer. When nothing is attached the calls are
 * plain calls to near-empty functions.
 *
 * Records are copied raw, so their layouts are the ABI: fixed-width types,
 * natural alignment, no packing, at most AGENT_RAW_LEN (ptbpf_events.h)
 * bytes each. Times are nanoseconds of CLOCK_MONOTONIC (the clock of
 * bpf_ktime_get_ns) unless the agent reported PTBPF_AGENT_CLOCK_DEFAULT.
 */
#ifndef PTBPF_AGENT_H
#define PTBPF_AGENT_H

#include <stdint.h>

/* The agent's path as ptbpf's ptrace dlopen names it: its directory, then
 * "/./" and the file, a name no other loader uses. The agent takes it for
 * "injected"; a process that loads the agent itself names it otherwise
 * (LD_PRELOAD, CUDA_INJECTION64_PATH, dlopen) and keeps it. */
#define PTBPF_AGENT_INJECTED_NAME "/./libptbpf-agent.so"

/*
 * The agent's control block, the exported object ptbpf_agent_ctl. ptbpf
 * finds it by symbol and writes it through /proc/PID/mem (so a process that
 * exec'd is never written to); the agent polls it. No file is involved, so
 * nothing is left behind whatever stops ptbpf.
 *
 * ptbpf writes a command in two steps: everything from cmd on first, then
 * seq (bumped). The agent acts on each new seq, sends its statuses through
 * ptbpf_agent_status, and then stores ack = seq: once ptbpf reads ack ==
 * seq, every status of that command is in ptbpf's ring buffer.
 *
 * While on, the agent checks that ptbpf is alive by looking at the first
 * byte of its own ptbpf_agent_status: ptbpf's uprobe sits there (a
 * breakpoint) for as long as ptbpf lives, and the kernel removes it when
 * ptbpf exits or is killed (which can take seconds: so where both see the
 * same pids, the agent also checks ptbpf's pid). When either says ptbpf is
 * gone, the agent switches itself off within PTBPF_AGENT_POLL_MS while the job
 * works, within PTBPF_AGENT_IDLE_MS while it idles (below). A ptbpf that is
 * merely slow or stopped keeps its probe: the agent records on, and what its
 * full rings drop is counted.
 *
 * The agent's thread ticks every PTBPF_AGENT_POLL_MS only while something
 * happens (ops recorded, CUDA calls or GPU records seen, a command within
 * the last 10 s); otherwise every PTBPF_AGENT_IDLE_MS, so that a job that
 * idles pays (almost) nothing for being traced. A thread that records
 * while the agent idles wakes it, and ptbpf's reader with it (the op
 * rings' descriptor, idle below).
 */
#define PTBPF_CTL_MAGIC   0x6c74636670627470ULL /* "ptbpfctl" */
#define PTBPF_CTL_VERSION 2
#define PTBPF_AGENT_POLL_MS 20
#define PTBPF_AGENT_IDLE_MS 250
#define PTBPF_AGENT_MSG_MAX 1024 /* a status message's bytes, NUL included */

enum ptbpf_agent_cmd {
	PTBPF_CMD_OFF = 0,  /* record nothing, stay loaded (its thread polls) */
	PTBPF_CMD_ON = 1,   /* record what words asks for */
	PTBPF_CMD_EXIT = 2, /* switch off, retire every entry point and end the
			     * agent's thread: it can then be unloaded */
};

enum ptbpf_agent_state {
	PTBPF_STATE_DORMANT = 0,
	PTBPF_STATE_ON = 1,
	PTBPF_STATE_GONE = 2, /* thread ended after EXIT: dlclose is safe once no
			       * thread is in its code or busy (below) */
};

struct ptbpf_agent_ctl {
	uint64_t magic;             /*   0: PTBPF_CTL_MAGIC (the agent's) */
	uint32_t version;           /*   8: PTBPF_CTL_VERSION */
	uint32_t agent_tid;         /*  12: the agent's thread, 0 once it ended */
	/* Written by ptbpf: */
	uint64_t seq;               /*  16: bumped last, for every command */
	uint32_t cmd;               /*  24: enum ptbpf_agent_cmd */
	uint32_t owner;             /*  28: ptbpf's pid where it is the same in the
				     *      agent's pid namespace, else 0 */
	uint64_t job_buf_requested; /*  32: the job's own CUPTI buffer callbacks */
	uint64_t job_buf_completed; /*  40:   (Kineto's), 0 if not known */
	uint32_t injected;          /*  48: 1: ptbpf loaded it (ptrace), so a
				     *      ptbpf unloads it at detach; the
				     *      agent sets it itself when loaded
				     *      as PTBPF_AGENT_INJECTED_NAME */
	uint32_t pad0;
	char words[128];            /*  56: " ops" and OPS_WORD_*: what to record */
	/* Written by the agent: */
	uint64_t ack;               /* 184: the last seq acted upon */
	uint64_t handle;            /* 192: its own link_map (what dlopen returned) */
	uint32_t state;             /* 200: enum ptbpf_agent_state */
	uint32_t pad1;
};

/*
 * Threads inside the agent's code, the exported object ptbpf_agent_busy: a
 * thread sets its byte when it enters through a callback and clears it when
 * it leaves (threads past the bytes count in `more`). With every thread
 * stopped, all zero and no thread's instruction pointer in the agent's text
 * means no thread is in the agent: ptbpf only unloads it then.
 */
#define PTBPF_AGENT_BUSY_THREADS 1024
struct ptbpf_agent_busy {
	uint8_t thread[PTBPF_AGENT_BUSY_THREADS];
	uint32_t more;
	uint32_t pad;
};

/* ptbpf_agent_status() codes: >= 0 informational, < 0 a failure of what
 * the message names (the agent keeps what else it could switch on). */
enum ptbpf_agent_code {
	PTBPF_AGENT_ACTIVE = 0,         /* GPU timeline on; message says what is on */
	PTBPF_AGENT_DORMANT = 1,        /* switched off; message gives totals */
	PTBPF_AGENT_NO_CORRELATION = 2, /* no CUDA API callbacks (CUPTI's one
					 * callback subscriber belongs to another
					 * tool, or the job's profiler just took
					 * it): no ptbpf_agent_correlate, no CUDA
					 * calls in the op rings */
	PTBPF_AGENT_OPS_ON = 4,         /* RecordFunction callbacks registered:
					 * value = address of the ops rings'
					 * struct ptbpf_ops_desc */
	PTBPF_AGENT_NO_CUDA = 5,        /* no libcuda in the process: no GPU
					 * timeline (ops only) */
	PTBPF_AGENT_GPU_PAUSED = 6,     /* the job's own CUPTI user (torch.profiler,
					 * Kineto on demand) has a session: the
					 * agent left CUPTI's activity API to it
					 * and records no GPU timeline until
					 * PTBPF_AGENT_GPU_RESUMED; value = the
					 * CLOCK_MONOTONIC time it stepped aside */
	PTBPF_AGENT_GPU_RESUMED = 7,    /* the job's session is over: the GPU
					 * timeline is back; value = when */
	PTBPF_AGENT_DEVICE = 8,         /* once per session and device: "device
					 * properties: device=N key=value ...
					 * name=REST" under Kineto's
					 * deviceProperties keys; value = N */
	PTBPF_AGENT_VERSIONS = 9,       /* once per session: "cuda versions:
					 * cupti_version=V cuda_runtime_version=V
					 * cuda_driver_version=V" */
	PTBPF_AGENT_STEPS = 10,         /* the step signal (" steps") went on or
					 * off; message says which and why */
	PTBPF_AGENT_REGIONS = 11,       /* torch.compile's regions (" regions"):
					 * value 1 once on; otherwise why not, or
					 * what became of them */
	PTBPF_AGENT_GRAPHS = 12,        /* the kept capture map (" graphs"):
					 * went on (value 1) or off, or what a
					 * window got of it (value: nodes sent) */
	PTBPF_AGENT_ERR_LOAD = -1,      /* libcupti.so.13 could not be loaded */
	PTBPF_AGENT_ERR_SYMBOL = -2,    /* a CUPTI function is missing */
	PTBPF_AGENT_ERR_CUPTI = -3,     /* a CUPTI call failed (no device,
					 * no driver...); message names it */
	PTBPF_AGENT_ERR_MEMORY = -5,    /* the buffer pool could not be allocated */
	PTBPF_AGENT_ERR_OPS = -6,       /* ops were asked for but cannot be
					 * recorded (no libtorch RecordFunction
					 * API, or no memory); message says why */
	PTBPF_AGENT_ERR_STEPS = -7,     /* the step signal was asked for but
					 * torch has no RecordFunction API */
};

/*
 * Ops from RecordFunction callbacks (asked for by " ops" in the control
 * block's words). The agent registers global at::RecordFunction callbacks; each
 * begin and end becomes a record in a ring of the calling thread. The rings
 * live in the agent's own memory (allocated at the first start, reused by
 * later sessions, unmapped when the agent is unloaded); ptbpf reads them
 * and advances each ring's tail through the process's memory. One
 * producer (the owning thread) and one consumer (ptbpf) per ring; a full
 * ring drops records and counts them, so that what the threads did =
 * written + dropped (+ no_slot), and written = read (+ what a process took
 * with it unread: its _exit probe saves the counters, see ptbpf_ops_loc in
 * ptbpf_events.h). Counters count records and, apart, the BEGIN records
 * among them: ops.
 */
#define PTBPF_OPS_MAGIC      0x7074627066306f70ULL /* "pto0fbtp" */
#define PTBPF_OPS_VERSION    7
#define PTBPF_OPS_SLOTS      64
#define PTBPF_OPS_SLOT_BYTES (4u << 20) /* header included */
#define PTBPF_OPS_NAME_MAX   111        /* longer names are truncated */

struct ptbpf_ops_desc {
	uint64_t magic;           /* PTBPF_OPS_MAGIC */
	uint32_t version;         /* PTBPF_OPS_VERSION */
	uint32_t nslots;          /* PTBPF_OPS_SLOTS */
	uint64_t slot_bytes;      /* PTBPF_OPS_SLOT_BYTES */
	uint64_t slots;           /* address of slot 0; slot i at slots + i * slot_bytes */
	uint64_t no_slot;         /* 32: records of threads that found no free slot */
	uint64_t no_slot_begins;  /* 40: ... BEGIN records among them */
	uint32_t layout_ok;       /* 48: 1 while RecordFunction's scope byte sat where
				   * expected, so sequence numbers are read */
	uint32_t clock;           /* 52: enum ptbpf_ops_clock: where the records'
				   * CLOCK_MONOTONIC timestamps are read from
				   * (TSC: from some point of this session on) */
	uint64_t clock_checks;    /* 56: OPS_CLOCK_TSC: the TSC line checked against
				   * CLOCK_MONOTONIC (every PTBPF_AGENT_POLL_MS) */
	uint64_t clock_steps;     /* 64: ... checks that found it off by over 100 us
				   * and set it anew (else it is slewed) */
	uint64_t clock_max_err_ns; /* 72: ... the largest difference found */
	/* 80: 1 while the agent idles (nothing recorded for a while): ptbpf may
	 * then read the rings seldom, for the first record written while it is
	 * set clears it and calls ptbpf_agent_wake() first (the thread that
	 * clears it also wakes the agent's thread, a futex on this word). */
	uint32_t idle;
	uint32_t pad;
};

/* OPS_CLOCK_TSC: the TSC (invariant), converted in the agent along a line
 * its thread keeps near CLOCK_MONOTONIC (user/agent/clock.c); cheaper than
 * clock_gettime() per record. OPS_WORD_KERNEL_CLOCK asks for the kernel's. */
enum ptbpf_ops_clock { OPS_CLOCK_KERNEL = 0, OPS_CLOCK_TSC = 1 };

/* A thread's ring: this header, then slot_bytes - 128 bytes of records. */
enum ptbpf_ops_slot_state { OPS_SLOT_FREE = 0, OPS_SLOT_OWNED, OPS_SLOT_RETIRED };

struct ptbpf_ops_slot {
	uint64_t head;            /*  0: bytes ever written (producer) */
	uint32_t tid;             /*  8: owning thread (OS tid) */
	uint32_t state;           /* 12: enum ptbpf_ops_slot_state; RETIRED once the
				   *     thread exited; ptbpf frees it when drained */
	uint64_t dropped;         /* 16: records lost to a full ring */
	uint64_t gap_lost;        /* 24: (the agent's) lost since the last record */
	uint64_t gap_from;        /* 32: when the first of them was */
	uint64_t written;         /* 40: records ever written into it */
	uint64_t begins;          /* 48: BEGIN records ever written into it */
	uint64_t begins_dropped;  /* 56: BEGIN records lost to a full ring */
	uint64_t tail;            /* 64: bytes ever read (ptbpf) */
	/* The counts above as the agent was last switched on, set while nothing
	 * writes: where this session's records begin. (Read together, head and
	 * written cannot be: a thread writes between the two.) */
	uint64_t start_head;      /* 72 */
	uint64_t start_written;   /* 80 */
	uint64_t start_begins;    /* 88 */
	uint64_t start_dropped;   /* 96 */
	uint64_t start_begins_dropped; /* 104 */
	uint8_t pad1[16];
};
_Static_assert(sizeof(struct ptbpf_ops_slot) == 128, "a ring's header is 128 bytes");

/* Records are 8-byte aligned and never wrap: a record that does not fit
 * before the ring's end is preceded by OPS_REC_PAD up to the end (or, with
 * fewer than 32 bytes left, by nothing: the reader skips such a rest). */
/* OPS_REC_GAP: the thread lost records to a full ring just before this
 * point, the first at ts: frames open on it then may have lost their ends.
 * seq = the ring's dropped and rf = its begins_dropped as this record was
 * written (counts since the ring was made: the reader takes the
 * differences, so that a gap whose record it never reads is still in the
 * next one's). */
enum ptbpf_ops_rec_type { OPS_REC_BEGIN = 1, OPS_REC_END, OPS_REC_PAD, OPS_REC_GAP };
#define OPS_END_UNWINDING 1 /* ended while a C++ exception was in flight */
/* CUDA API calls (from CUPTI callbacks) in the same rings: BEGIN scope =
 * OPS_SCOPE_CUDA_API | CUpti_CallbackDomain (1 driver, 2 runtime), name =
 * the API function, seq = the CUPTI callback id << 32 | correlation id; rf = OPS_API_KEY |
 * domain << 32 | correlation id, for BEGIN and END alike. */
#define OPS_SCOPE_CUDA_API 0x80
#define OPS_API_KEY        (1ull << 63)

struct ptbpf_ops_rec {
	uint64_t ts;              /*  0: CLOCK_MONOTONIC ns */
	uint64_t rf;              /*  8: the RecordFunction's address: pairs
				   *     begin and end (an async end may come
				   *     from another thread) */
	int64_t seq;              /* 16: BEGIN: the RecordFunction's sequence
				   *     number (-1: none or unknown); END:
				   *     the thread's next autograd sequence
				   *     number (at::sequence_number::peek) */
	uint16_t size;            /* 24: bytes of this record, name included */
	uint8_t type;             /* 26: enum ptbpf_ops_rec_type */
	uint8_t scope;            /* 27: BEGIN: at::RecordScope (0 FUNCTION, 1
				   *     BACKWARD_FUNCTION, 7 USER_SCOPE...); END:
				   *     OPS_END_* flags */
	uint16_t name_len;        /* 28: BEGIN: name bytes that follow (no NUL) */
	uint16_t shapes_len;      /* 30: BEGIN: input-shape bytes after the name
				   *     (OPS_WANT_SHAPES), see below */
};

/* Words of the control block after " ops": what else the recorder
 * records. */
#define OPS_WORD_OPS    " ops"
#define OPS_WORD_NO_GPU " nogpu"     /* no GPU timeline: CUPTI left alone */
#define OPS_WORD_SHAPES " shapes"
#define OPS_WORD_STACKS " pystacks=" /* N: call ptbpf_agent_pystack for one
				      * op or CUDA call in N per thread */
#define OPS_WORD_KERNEL_CLOCK " kclock" /* timestamps from clock_gettime() */
#define OPS_WORD_REGIONS " regions" /* torch.compile's regions (regions.c) */

/*
 * Input shapes (record_shapes), after a BEGIN's name: u8 count, then per
 * input u8 kind (OPS_IN_*); a tensor adds u8 dtype (c10::ScalarType), u8
 * rank and rank little-endian int64 sizes (unaligned). At most
 * OPS_MAX_INPUTS inputs and OPS_MAX_RANK sizes each are kept.
 */
enum { OPS_IN_OTHER = 0, OPS_IN_TENSOR = 1, OPS_IN_SCALAR = 2, OPS_IN_UNKNOWN = 3 };
#define OPS_MAX_INPUTS 16
#define OPS_MAX_RANK   8
#define OPS_SHAPES_MAX (1 + OPS_MAX_INPUTS * (3 + 8 * OPS_MAX_RANK))


/*
 * The always-on step signal (user/agent/steps.c), asked for by " steps" in
 * the control block's words, with any command but EXIT: one RecordFunction
 * callback on USER_SCOPE only (ATen ops, FUNCTION scope, never reach it),
 * which keeps step counters in the exported object ptbpf_agent_steps. No
 * ring, no record per op: the daemon reads the block whenever it likes.
 * Steps are ProfilerStep#N regions (torch.profiler's step()), or, in a job
 * without them, the time from one Optimizer.step#... region's end to the
 * next one's. The layer stays on between capture windows, while no probe
 * of ptbpf's is there: the daemon changes heartbeat at least every
 * PTBPF_STEPS_LEASE_MS / 4, and an agent that saw no heartbeat, command or
 * probe of ptbpf's for PTBPF_STEPS_LEASE_MS (or whose owner's pid is
 * gone) removes its callback.
 *
 * Consistency: the agent makes seq odd before it writes and even after;
 * a reader takes a copy whose seq was even and the same before and after.
 */
#define PTBPF_STEPS_MAGIC    0x7370657473667062ULL /* "bpfsteps" */
#define PTBPF_STEPS_VERSION  2  /* 1: the block up to recent[] (no collectives) */
#define PTBPF_STEPS_LEASE_MS 10000
#define PTBPF_STEPS_BUCKETS  16 /* the last one is +Inf */
#define PTBPF_STEPS_RECENT   64
#define OPS_WORD_STEPS       " steps"
#define OPS_WORD_GRAPHS      " graphs" /* with " steps": the kept capture map */
#define PTBPF_STEPS_COLL_NAME 32 /* a collective's name, NUL included */
#define PTBPF_STEPS_COLL_OPEN 16 /* collectives open at once that are timed */

/* Upper bounds of the step-time histogram's buckets, ns (Prometheus' le). */
#define PTBPF_STEPS_BOUNDS_NS { 1000000ull, 2500000ull, 5000000ull, 10000000ull,	\
		25000000ull, 50000000ull, 100000000ull, 250000000ull, 500000000ull,	\
		1000000000ull, 2500000000ull, 5000000000ull, 10000000000ull,		\
		30000000000ull, 60000000000ull }

enum ptbpf_steps_source {
	PTBPF_STEPS_NONE = 0,      /* no step seen yet */
	PTBPF_STEPS_PROFILER = 1,  /* ProfilerStep#N regions */
	PTBPF_STEPS_OPTIMIZER = 2, /* Optimizer.step ends */
};

struct ptbpf_agent_steps {
	uint64_t magic;      /*   0: PTBPF_STEPS_MAGIC */
	uint32_t version;    /*   8: PTBPF_STEPS_VERSION */
	uint32_t on;         /*  12: (agent) 1 while its callback is registered */
	uint64_t heartbeat;  /*  16: (ptbpf) any new value renews the lease */
	uint64_t seq;        /*  24: (agent, the rest too) odd while writing */
	uint64_t source;     /*  32: enum ptbpf_steps_source */
	uint64_t steps;      /*  40: steps ended */
	uint64_t cur_start;  /*  48: CLOCK_MONOTONIC ns the step under way began
			      *      (0: none known) */
	uint64_t last_end;   /*  56: when the last step ended */
	uint64_t sum_ns;     /*  64: all steps' time */
	uint64_t bucket[PTBPF_STEPS_BUCKETS]; /* 72: steps per bucket (not cumulative) */
	uint64_t loader_ns;  /* 200: in enumerate(DataLoader)#...__next__ regions */
	uint64_t loader_n;   /* 208: ... how many */
	uint64_t optim_ns;   /* 216: in Optimizer.step#... regions */
	uint64_t optim_n;    /* 224 */
	uint64_t recent[PTBPF_STEPS_RECENT]; /* 232: step k's ns (k from 1) at
					      * recent[(k - 1) % PTBPF_STEPS_RECENT] */
	/* 744 (version 2): c10d's collectives, as the record_function regions
	 * torch opens for each one of any backend ("gloo:all_reduce",
	 * "nccl:all_reduce", "mpi:...", "ucc:..."): entered on the calling
	 * thread, ended where the work completes (another thread, for gloo).
	 * Sequence numbers count the process's collectives of every group. */
	uint64_t coll_entered;   /* 744: collectives entered: the last one's number */
	uint64_t coll_left;      /* 752: ... ended */
	uint64_t coll_wait_ns;   /* 760: time in the ended ones, entry to end */
	uint64_t coll_enter_ts;  /* 768: when the last one was entered */
	uint64_t coll_left_ts;   /* 776: when the last one ended */
	uint64_t coll_left_seq;  /* 784: the number of the last one ended */
	uint64_t coll_open_ts;   /* 792: when the oldest one still open was
				  *      entered (0: none open) */
	uint64_t coll_untimed;   /* 800: entered past PTBPF_STEPS_COLL_OPEN open:
				  *      never counted as ended */
	char coll_name[PTBPF_STEPS_COLL_NAME];      /* 808: the last one entered */
	char coll_left_name[PTBPF_STEPS_COLL_NAME]; /* 840: the last one ended */
};
#define PTBPF_STEPS_V1_SIZE 744

/* Argument of ptbpf_agent_kernel(): one CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
 * record (CUpti_ActivityKernel10 in CUDA 13). 104 bytes. */
struct ptbpf_agent_kernel {
	uint64_t start;                 /*   0: ns, kernel start on the GPU */
	uint64_t end;                   /*   8: ns, kernel end on the GPU */
	uint64_t graph_node_id;         /*  16: CUDA graph node; 0 if not from a graph */
	const char *name;               /*  24: mangled kernel name, owned by
					 *      CUPTI, valid during the call and
					 *      stable for the process's life */
	uint32_t correlation_id;        /*  32: = the launch's ptbpf_agent_correlate */
	uint32_t device_id;             /*  36: CUDA device ordinal */
	uint32_t context_id;            /*  40: CUPTI context id */
	uint32_t stream_id;             /*  44: CUPTI stream id */
	int32_t grid_x;                 /*  48: grid dimensions, in blocks */
	int32_t grid_y;                 /*  52 */
	int32_t grid_z;                 /*  56 */
	int32_t block_x;                /*  60: block dimensions, in threads */
	int32_t block_y;                /*  64 */
	int32_t block_z;                /*  68 */
	int32_t static_shared_memory;   /*  72: bytes per block */
	int32_t dynamic_shared_memory;  /*  76: bytes per block */
	uint32_t graph_id;              /*  80: CUDA graph; 0 if not from a graph */
	uint16_t registers_per_thread;  /*  84 */
	uint8_t launch_type;            /*  86: CUpti_ActivityLaunchType (0 regular,
					 *      1 cooperative single, 2 multi-device,
					 *      3 cluster...) */
	uint8_t is_device_launched;     /*  87: 1 if launched from the GPU (CDP) */
	uint32_t cluster_x;             /*  88: thread-block cluster dimensions; */
	uint32_t cluster_y;             /*  92:  0 when no cluster was set */
	uint32_t cluster_z;             /*  96 */
	uint32_t reserved;              /* 100: 0 */
};

/* Argument of ptbpf_agent_memcpy(): one CUPTI_ACTIVITY_KIND_MEMCPY record
 * (CUpti_ActivityMemcpy6). 64 bytes. */
struct ptbpf_agent_memcpy {
	uint64_t start;                 /*   0: ns, copy start on the GPU */
	uint64_t end;                   /*   8: ns, copy end */
	uint64_t bytes;                 /*  16: bytes copied */
	uint64_t graph_node_id;         /*  24: 0 if not from a graph */
	uint64_t copy_count;            /*  32: copies in a batched copy (else 0 or 1) */
	uint32_t correlation_id;        /*  40 */
	uint32_t device_id;             /*  44 */
	uint32_t context_id;            /*  48 */
	uint32_t stream_id;             /*  52 */
	uint32_t graph_id;              /*  56: 0 if not from a graph */
	uint8_t copy_kind;              /*  60: CUpti_ActivityMemcpyKind (1 HtoD,
					 *      2 DtoH, 8 DtoD, 10 PtoP...) */
	uint8_t src_kind;               /*  61: CUpti_ActivityMemoryKind (1 pageable,
					 *      2 pinned, 3 device...) */
	uint8_t dst_kind;               /*  62: same, for the destination */
	uint8_t flags;                  /*  63: CUpti_ActivityFlag bits (1: async) */
};

/* Argument of ptbpf_agent_memset(): one CUPTI_ACTIVITY_KIND_MEMSET record
 * (CUpti_ActivityMemset4). 56 bytes. */
struct ptbpf_agent_memset {
	uint64_t start;                 /*   0: ns */
	uint64_t end;                   /*   8: ns */
	uint64_t bytes;                 /*  16: bytes set */
	uint64_t graph_node_id;         /*  24: 0 if not from a graph */
	uint32_t value;                 /*  32: the value stored */
	uint32_t correlation_id;        /*  36 */
	uint32_t device_id;             /*  40 */
	uint32_t context_id;            /*  44 */
	uint32_t stream_id;             /*  48 */
	uint16_t memory_kind;           /*  52: CUpti_ActivityMemoryKind */
	uint16_t flags;                 /*  54: CUpti_ActivityFlag bits (1: async) */
};

/* Argument of ptbpf_agent_graph_node(): a CUDA graph node made (CUPTI's
 * resource callback GRAPHNODE_CREATED, on the thread whose call made it:
 * a launch into a capturing stream, or an explicit cudaGraphAdd*Node) or
 * cloned from another (GRAPHNODE_CLONED: cudaGraphInstantiate makes a
 * clone of every node, and a replayed kernel's graph_node_id is the
 * clone's). 32 bytes. */
enum ptbpf_graph_node_kind { GRAPH_NODE_CREATED = 1, GRAPH_NODE_CLONED = 2 };

struct ptbpf_agent_graph_node {
	uint64_t node_id;        /*  0: cuptiGetGraphNodeId */
	uint64_t original_id;    /*  8: CLONED: the node it is a copy of; else 0 */
	uint32_t correlation_id; /* 16: CREATED: the CUDA call in progress on the
				  *     thread (the capture-time launch); 0: none */
	uint32_t graph_id;       /* 20: cuptiGetGraphId of its graph; 0: unknown */
	uint32_t kind;           /* 24: enum ptbpf_graph_node_kind */
	uint32_t node_type;      /* 28: CUgraphNodeType (0 kernel, 1 memcpy, 2 memset...) */
};

/* Argument of ptbpf_agent_graph_kept(): one node of the capture map the
 * daemon's always-on layer keeps between windows (" graphs", graphs.c),
 * sent at a window's start in the order made, with the op that was open
 * on the thread that made it then. 160 bytes. */
#define PTBPF_KEPT_OP_MAX 112
struct ptbpf_agent_graph_kept {
	struct ptbpf_agent_graph_node node; /*  0: as made (no correlation) */
	int64_t seq;             /* 32: the op's sequence number; -1: none */
	uint64_t made_ns;        /* 40: CLOCK_MONOTONIC when made */
	char op[PTBPF_KEPT_OP_MAX]; /* 48: the innermost op or region open
				     *     on the thread ("": none seen) */
};

/*
 * The entry points ptbpf's uprobes attach to (all called by the agent,
 * never by ptbpf):
 *
 *   ptbpf_agent_correlate  on the thread making a launch/copy/set API call,
 *                          at API entry: CUPTI's correlation id, the
 *                          callback id (CUpti_runtime_api_trace_cbid or
 *                          CUpti_driver_api_trace_cbid) and the domain
 *                          (CUpti_CallbackDomain: 1 driver, 2 runtime).
 *   ptbpf_agent_kernel/memcpy/memset
 *                          from CUPTI's buffer-completion thread, one call
 *                          per record; the pointer is valid during the call.
 *   ptbpf_agent_dropped    records CUPTI dropped for lack of a free buffer:
 *                          since the last call, and in total.
 *   ptbpf_agent_status     a state change or failure (enum ptbpf_agent_code),
 *                          a message, and a value (PTBPF_AGENT_OPS_ON: the
 *                          ops rings' descriptor address; else 0).
 *   ptbpf_agent_graph_node a CUDA graph node made or cloned, on the thread
 *                          that made it (struct ptbpf_agent_graph_node).
 *   ptbpf_agent_graph_kept a node of the kept capture map, from the agent's
 *                          thread at a window's start (struct
 *                          ptbpf_agent_graph_kept).
 *   ptbpf_agent_wake       on a job thread about to record while the agent
 *                          idled (ptbpf_ops_desc.idle): ptbpf's reader,
 *                          which reads the rings seldom then, reads them
 *                          often again.
 *
 * ptbpf_agent_activate/deactivate let a host program (or a debugger) switch
 * the agent's GPU timeline on and off without ptbpf's control block; such
 * an activation is not retracted by the agent's check for ptbpf's probe.
 */
void ptbpf_agent_correlate(uint32_t correlation_id, uint32_t cbid, uint32_t domain);
void ptbpf_agent_kernel(const struct ptbpf_agent_kernel *r);
void ptbpf_agent_memcpy(const struct ptbpf_agent_memcpy *r);
void ptbpf_agent_memset(const struct ptbpf_agent_memset *r);
void ptbpf_agent_graph_node(const struct ptbpf_agent_graph_node *r);
void ptbpf_agent_graph_kept(const struct ptbpf_agent_graph_kept *r);
void ptbpf_agent_dropped(uint64_t since_last, uint64_t total);
void ptbpf_agent_status(int code, const char *msg, uint64_t value);
void ptbpf_agent_wake(void);
void ptbpf_agent_activate(void);
void ptbpf_agent_deactivate(void);

#endif /* PTBPF_AGENT_H */

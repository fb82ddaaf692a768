/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Perfetto field numbers ptbpf writes and reads, per message, in one
 * place: the writer (perfetto.c), the trace reader (trace_read.c) and
 * merge use these. Source: user/trace/perfetto_trace.proto, a subset of
 * Perfetto's protos (v58.2).
 */
#ifndef PTBPF_PF_FIELDS_H
#define PTBPF_PF_FIELDS_H

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 }; /* wire types */

enum { F_TRACE_PACKET = 1 }; /* Trace */
enum { /* TracePacket */
	F_PKT_FTRACE_EVENTS = 1, F_PKT_CLOCK_SNAPSHOT = 6, F_PKT_TIMESTAMP = 8, F_PKT_SEQ_ID = 10,
	F_PKT_TRACK_EVENT = 11, F_PKT_INTERNED = 12, F_PKT_SEQ_FLAGS = 13,
	F_PKT_PREV_DROPPED = 42, F_PKT_CLOCK_ID = 58, F_PKT_DEFAULTS = 59,
	F_PKT_TRACK_DESC = 60, F_PKT_FIRST_ON_SEQ = 87, F_PKT_TRACE_ATTRS = 126,
	F_PKT_SYSTEM_INFO = 45, F_PKT_PERF_SAMPLE = 66,
};
/* The one byte that starts every packet record: Trace.packet, length-delimited. */
#define PF_PACKET_TAG ((F_TRACE_PACKET << 3) | PB_LEN)
enum { F_DEF_CLOCK_ID = 58, F_DEF_TRACK_EVENT = 11 }; /* TracePacketDefaults */
enum { F_TED_TRACK = 11 }; /* TrackEventDefaults */
enum { /* ClockSnapshot, Clock */
	F_CS_CLOCKS = 1, F_CS_PRIMARY = 2, F_CLK_ID = 1, F_CLK_TS = 2, F_CLK_INCREMENTAL = 3,
};
enum { F_TA_ATTR = 1, F_ATTR_KEY = 1, F_ATTR_LONG = 2, F_ATTR_STR = 3 }; /* TraceAttributes */
enum { /* TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor */
	F_TD_UUID = 1, F_TD_NAME = 2, F_TD_PROCESS = 3, F_TD_THREAD = 4,
	F_TD_PARENT = 5, F_TD_COUNTER = 8, F_TD_MERGE = 15,
	F_PD_PID = 1, F_PD_CMDLINE = 2, F_PD_NAME = 6, F_PD_LABELS = 8,
	F_THD_PID = 1, F_THD_TID = 2, F_THD_NAME = 5,
	F_CD_UNIT = 3,
};
enum { /* TrackEvent */
	F_TE_CAT_IIDS = 3, F_TE_ARGS = 4, F_TE_TYPE = 9, F_TE_NAME_IID = 10,
	F_TE_TRACK = 11, F_TE_CATEGORIES = 22, F_TE_NAME = 23, F_TE_COUNTER = 30,
	F_TE_FLOWS = 47, F_TE_TERM_FLOWS = 48,
	/* The older varint forms: the writer's short flow ids (perfetto.c). */
	F_TE_FLOWS_V = 36, F_TE_TERM_FLOWS_V = 42,
};
enum { /* DebugAnnotation */
	F_DA_NAME_IID = 1, F_DA_BOOL = 2, F_DA_UINT = 3, F_DA_INT = 4,
	F_DA_DOUBLE = 5, F_DA_STRING = 6, F_DA_POINTER = 7, F_DA_NAME = 10,
	F_DA_STRING_IID = 17,
};
enum { /* InternedData; its entries (EventCategory, EventName, ..., InternedString)
	* share iid = 1, name (or str) = 2 */
	F_ID_CATEGORIES = 1, F_ID_NAMES = 2, F_ID_ARG_NAMES = 3, F_ID_STRING_VALUES = 29,
	F_ENTRY_IID = 1, F_ENTRY_NAME = 2,
};

enum { /* PerfSample; InternedData's callstack tables: Frame, Mapping,
	* Callstack (profile_common.proto), function names and mapping paths
	* as InternedString */
	F_PS_CPU = 1, F_PS_PID = 2, F_PS_TID = 3, F_PS_CALLSTACK = 4, F_PS_CPU_MODE = 5,
	F_ID_FUNCTION_NAMES = 5, F_ID_FRAMES = 6, F_ID_CALLSTACKS = 7, F_ID_MAPPING_PATHS = 17,
	F_ID_MAPPINGS = 19,
	F_FRAME_IID = 1, F_FRAME_NAME = 2, F_FRAME_MAPPING = 3, F_FRAME_REL_PC = 4,
	F_MAP_IID = 1, F_MAP_PATHS = 7,
	F_STACK_IID = 1, F_STACK_FRAMES = 2,
};
enum { CPU_MODE_USER = 2 }; /* Profiling.CpuMode */

enum { /* FtraceEventBundle, its CompactSched (packed arrays); SystemInfo, Utsname */
	F_FB_CPU = 1, F_FB_LOST = 3, F_FB_COMPACT = 4,
	F_SCHED_SW_TS = 1, F_SCHED_SW_STATE = 2, F_SCHED_SW_PID = 3, F_SCHED_SW_PRIO = 4,
	F_SCHED_INTERN = 5, F_SCHED_SW_COMM = 6, F_SCHED_WK_TS = 7, F_SCHED_WK_PID = 8,
	F_SCHED_WK_CPU = 9, F_SCHED_WK_PRIO = 10, F_SCHED_WK_COMM = 11, F_SCHED_WK_FLAGS = 12,
	F_SI_UTSNAME = 1, F_SI_NUM_CPUS = 8,
	F_UTS_SYSNAME = 1, F_UTS_VERSION = 2, F_UTS_RELEASE = 3, F_UTS_MACHINE = 4,
};

enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 }; /* sequence_flags */
enum { CLOCK_ID_REALTIME = 1, CLOCK_ID_MONOTONIC = 3, CLOCK_ID_BOOTTIME = 6 }; /* BuiltinClock */
/* The first of the sequence-scoped clock ids (64-127): ptbpf's writer
 * defines it on each event sequence as an incremental clock in MONOTONIC
 * nanoseconds, so that an event's timestamp is its distance from the
 * sequence's previous one. */
enum { CLOCK_ID_SEQ_INCREMENTAL = 64 };
enum { MERGE_NONE = 2 }; /* TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE */
enum { TE_SLICE_BEGIN = 1, TE_SLICE_END = 2, TE_INSTANT = 3, TE_COUNTER = 4 }; /* TrackEvent.Type */

/*
 * The writer's last packet: a TraceAttributes entry with this key whose
 * value is the packet's own offset in the file (the bytes before it). A
 * trace that ends with it was written to its end; one without it was cut
 * (the writer was killed, or its disk filled).
 */
#define PF_END_MARKER_KEY "dev.ptbpf.trace_complete_bytes"

#endif /* PTBPF_PF_FIELDS_H */

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * torch.distributed.rpc's TensorPipe agent, seen from entry probes only (a
 * uretprobe on C++ code kills the process when an exception unwinds through
 * it): each probe copies what its function's arguments show, one struct
 * ptbpf_rpc per hit; user/record/join_rpc.c pairs them into calls. The
 * cookie is enum ptbpf_rpc_probe. x86-64, Itanium C++ ABI: a class that is
 * not trivially copyable (intrusive_ptr, shared_ptr, std::string) is passed
 * by a pointer to it, and returned through a hidden first pointer.
 *
 * Layouts, the same in torch 1.13 and 2.x: Message (a CustomClassHolder:
 * vptr, refcount, weakcount) has payload_ (a vector: begin, end) at +24,
 * tensors_ at +48, type_ (u32) at +72, id_ (i64) at +80. The agent's
 * RpcAgent base starts with workerInfo_ at +8, a WorkerInfo (also a
 * CustomClassHolder) whose name_ (std::string: data, size) is at +24. An
 * autograd Node's sequence_nr_ is at +24 (after its vptr and
 * enable_shared_from_this).
 */
#ifndef PTBPF_RPC_BPF_H
#define PTBPF_RPC_BPF_H

#include "common.bpf.h"
#include "pystack.bpf.h"

#define RPC_MSG_PAYLOAD 24
#define RPC_MSG_TENSORS 48
#define RPC_MSG_TYPE    72
#define RPC_MSG_ID      80
#define RPC_WORKER_NAME 24 /* in a WorkerInfo */
#define RPC_AGENT_INFO  8  /* the agent's own WorkerInfo */
#define RPC_NODE_SEQ    24 /* an autograd Node's sequence_nr_ (vptr, weak_ptr) */

static __always_inline __u64 rpc_read(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* A std::string's text (at most RPC_NAME_LEN - 1 bytes). */
static __always_inline void rpc_str(char *dst, __u32 len, __u64 str)
{
	__u64 data = rpc_read(str);

	if (!data || bpf_probe_read_user_str(dst, len, (void *)data) < 0)
		dst[0] = 0;
}

/* len bytes at src into r->payload. */
static __always_inline void rpc_bytes(struct ptbpf_rpc *r, __u64 src, __u64 len)
{
	if (len > RPC_PAYLOAD_LEN)
		len = RPC_PAYLOAD_LEN;
	asm volatile("" : "+r"(len));
	if (len > RPC_PAYLOAD_LEN)
		return;
	if (src && len && !bpf_probe_read_user(r->payload, len, (void *)src))
		r->copied = len;
}

/* The message's type, id and sizes; with_payload: its first bytes too. */
static __always_inline void rpc_message(struct ptbpf_rpc *r, __u64 msg, bool with_payload)
{
	__u64 begin = rpc_read(msg + RPC_MSG_PAYLOAD), end = rpc_read(msg + RPC_MSG_PAYLOAD + 8);
	__u64 tb = rpc_read(msg + RPC_MSG_TENSORS), te = rpc_read(msg + RPC_MSG_TENSORS + 8);
	__u32 type = 0;

	r->ev.key = msg;
	bpf_probe_read_user(&type, sizeof(type), (void *)(msg + RPC_MSG_TYPE));
	r->ev.arg[0] = type;
	if (bpf_probe_read_user(&r->ev.arg[1], sizeof(__u64), (void *)(msg + RPC_MSG_ID)))
		r->ev.arg[1] = (__u64)-1;
	r->ev.arg[2] = end >= begin ? end - begin : 0;
	r->tensors = te >= tb ? (te - tb) / 8 : 0;
	if (with_payload)
		rpc_bytes(r, begin, r->ev.arg[2]);
}

SEC("uprobe.multi")
int rpc_probe(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), ts = bpf_ktime_get_ns();
	__u64 di = PT_REGS_PARM1(ctx), si = PT_REGS_PARM2(ctx), dx = PT_REGS_PARM3(ctx);
	struct ptbpf_py_proc *p;
	struct ptbpf_rpc *r;

	/* The caller's Python stack tells rpc_sync from rpc_async: before the
	 * record, at its time (reorder.c keeps arrival order at equal times). */
	if (cookie == RPC_CALL && (p = py_wanted(bpf_get_current_pid_tgid() >> 32, false)))
		py_stack_emit(p, ts);
	r = reserve_sized(sizeof(*r), STAT_DROP_RPC_FULL);
	if (!r)
		return 0;
	fill(&r->ev, EV_RPC, SRC_ENTRY_PROBE, (__u32)cookie, 0);
	r->ev.ts = ts;
	r->ev.arg[1] = (__u64)-1;
	r->tensors = r->copied = 0;
	r->name[0] = 0;
	switch (cookie) {
	case RPC_SEND: /* pipeWrite(this, const shared_ptr<Pipe>&, intrusive_ptr<Message>, ...) */
		rpc_message(r, rpc_read(dx), true);
		rpc_str(r->name, sizeof(r->name), di + RPC_AGENT_INFO + RPC_WORKER_NAME);
		break;
	case RPC_RECEIVE: /* operator()(ret, this, Message&, ...) */
		rpc_message(r, dx, true);
		break;
	case RPC_CALL: /* send(ret, this, const WorkerInfo&, intrusive_ptr<Message>, ...) */
		rpc_message(r, rpc_read(PT_REGS_PARM4(ctx)), true);
		rpc_str(r->name, sizeof(r->name), dx + RPC_WORKER_NAME);
		break;
	case RPC_LOOKUP: /* getWorkerInfo(this, const std::string&) */
		rpc_str(r->name, sizeof(r->name), si);
		break;
	case RPC_RESPONSE: /* (this, shared_ptr<AtomicJitFuture>, intrusive_ptr<Message>, ...) */
		rpc_message(r, rpc_read(dx), true);
		r->ev.key = rpc_read(si);
		break;
	case RPC_COMPLETING: /* getStorages(ret, this) */
		rpc_message(r, si, false);
		break;
	case RPC_BUSY: /* (this, int& counter) */
		r->ev.arg[0] = si - di;
		break;
	case RPC_FAIL: /* (this, shared_ptr<AtomicJitFuture>, std::string) */
		r->ev.key = rpc_read(si);
		r->ev.arg[2] = rpc_read(dx + 8);
		rpc_bytes(r, rpc_read(dx), r->ev.arg[2]);
		break;
	case RPC_UNTIMEOUT: /* (this, uint64_t id) */
		r->ev.arg[1] = si;
		break;
	case RPC_AUTOGRAD_SEND: /* (ret, this, const shared_ptr<Context>&,
				 * const shared_ptr<SendRpcBackward>&, bool) */
		r->ev.key = rpc_read(PT_REGS_PARM4(ctx));
		r->ev.arg[0] = rpc_read(r->ev.key + RPC_NODE_SEQ);
		break;
	}
	submit(r);
	return 0;
}

#endif /* PTBPF_RPC_BPF_H */

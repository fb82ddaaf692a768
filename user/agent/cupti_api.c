// SPDX-License-Identifier: BSD-2-Clause
/*
 * CUDA calls through CUPTI's one callback subscriber. At a launch's entry,
 * on the launching thread, its correlation id goes to ptbpf's probe point
 * ptbpf_agent_correlate: what joins a kernel to the launch (and the op)
 * that made it. With the op recorder on, every CUDA runtime call becomes a
 * slice in the thread's op ring (ops.c) instead. The job's own profiler
 * takes the subscriber from the agent when it subscribes (cupti_job.c);
 * CUDA calls then come from ptbpf's uprobes alone.
 */
#include "cupti_int.h"
#include "launch_cbids.h"

#include <stdio.h>

CUpti_SubscriberHandle subscriber;
static bool launches_on; /* a window's launch callbacks are on it */
bool job_took_cupti;
_Atomic uint64_t api_calls_seen;

/* With the op recorder on, every CUDA runtime call is recorded (as a slice
 * on the calling thread, in its op ring), as torch.profiler's Kineto
 * records them: the syncs, copies, sets, allocations, events and stream
 * queries that carry a step's cross-stream dependencies. But for these,
 * which Kineto leaves out too: frequent and telling nothing. */
static const CUpti_CallbackId runtime_left_out[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
};

/*
 * Only switched on, one by one, never off on a live subscription. The agent
 * once switched the whole runtime domain on, then cudaGetDevice and the
 * others above off again, while torch calls them all the time; 1 job in
 * 10 then raised in its own profiler after a few daemon windows
 * (collection.cpp:1152 "inserted.second"), because every runtime and
 * driver record of its session carried one correlation id (4 of 4 such
 * jobs, none of the others; H200, 2026-12-02). Switching callbacks off on
 * a live subscription while a thread is in the call breaks CUPTI (alone,
 * in tests/gpu's cupti_race: 10 of 10 processes), subscribing and
 * unsubscribing does not (0 of 10). The ids are those of the CUPTI the
 * agent is built with.
 */
static bool left_out(CUpti_CallbackId id)
{
	for (size_t i = 0; i < sizeof(runtime_left_out) / sizeof(runtime_left_out[0]); i++)
		if (id == runtime_left_out[i])
			return true;
	return false;
}

/*
 * On the launching thread, at API entry. A runtime call and the driver call
 * it makes share one correlation id; the driver one is skipped then, so
 * each launch costs one probe hit.
 */
static __thread uint32_t runtime_correlation __attribute__((tls_model("initial-exec")));
/* The call in progress on the thread, runtime or driver (0: none): a graph
 * node made now was made by it (a launch into a capturing stream). */
static __thread uint32_t call_correlation __attribute__((tls_model("initial-exec")));

/*
 * A CUDA graph node made or cloned (CUPTI's resource callbacks): while a
 * stream is captured, each launch makes a node, on the launching thread,
 * inside the launch's call; instantiation clones them all, and replayed
 * kernels carry the clone's id. ptbpf joins a replayed kernel to the op
 * open at the capture through these records (record/gpu_timeline.c).
 * Rare: a capture's launches and an instantiation, never a replay.
 */
static void graph_node(CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
	const CUpti_GraphData *g = rd->resourceDescriptor;
	struct ptbpf_agent_graph_node r = { .kind = cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED ?
							    GRAPH_NODE_CREATED : GRAPH_NODE_CLONED };

	if (cbid == CUPTI_CBID_RESOURCE_GRAPH_CREATED) { /* by a capture: the kept map's */
		graphs_made();
		return;
	}
	if (!g || !g->node || p_graph_node_id(g->node, &r.node_id) != CUPTI_SUCCESS)
		return;
	if (g->graph)
		p_graph_id(g->graph, &r.graph_id);
	r.node_type = (uint32_t)g->nodeType;
	if (r.kind == GRAPH_NODE_CLONED) {
		if (!g->originalNode ||
		    p_graph_node_id(g->originalNode, &r.original_id) != CUPTI_SUCCESS)
			return;
	} else {
		r.correlation_id = call_correlation;
	}
	ptbpf_agent_graph_node(&r);
	graphs_node(&r);
}

static void CUPTIAPI api_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	uint8_t *busy;

	if (agent_own_cuda_call)
		return;
	busy = busy_enter();
	/* No locked add on the launch path: a count that misses a few still
	 * changes while calls come (the agent's thread reads it to idle). */
	atomic_store_explicit(&api_calls_seen,
			      atomic_load_explicit(&api_calls_seen, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		graph_node(cbid, data);
		busy_leave(busy);
		return;
	}
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		runtime_correlation = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
		call_correlation = runtime_correlation;
	} else if (domain != CUPTI_CB_DOMAIN_DRIVER_API ||
		   cb->correlationId == runtime_correlation) {
		busy_leave(busy);
		return;
	} else {
		call_correlation = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
	}
	/* Recording ops: the call becomes a slice in the thread's op ring,
	 * no probe hit at all. Else the correlation goes to ptbpf's uprobe,
	 * which finds the call in its own (libcuda uprobe) slice. */
	if (!(api_to_rings && agent_ops_api(cb->callbackSite == CUPTI_API_ENTER, domain, cbid,
					    cb->correlationId, cb->functionName)) &&
	    cb->callbackSite == CUPTI_API_ENTER)
		ptbpf_agent_correlate(cb->correlationId, cbid, domain);
	busy_leave(busy);
}

/* A subscriber with the graph callbacks (CUPTI's id functions needed:
 * CUDA 11.0's CUPTI on): a node made or cloned, and a graph made (by a
 * capture: the kept map's, graphs.c). other: who holds CUPTI's one, if not. */
static CUptiResult new_subscriber_locked(char *other, size_t len)
{
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE, .subscriberName = "ptbpf",
		.oldSubscriberName = other, .oldSubscriberSize = len,
	};
	void *cb = stub_entry(STUB_CUPTI_API, (void *)api_callback);
	CUptiResult res;

	res = p_subscribe_v2 ? p_subscribe_v2(&subscriber, (CUpti_CallbackFunc)cb, NULL, &params) :
			       p_subscribe(&subscriber, (CUpti_CallbackFunc)cb, NULL);
	if (res != CUPTI_SUCCESS) {
		subscriber = NULL;
		return res;
	}
	if (p_graph_node_id && p_graph_id) {
		p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
				  CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
		p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
				  CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
		p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
				  CUPTI_CBID_RESOURCE_GRAPH_CREATED);
	}
	return res;
}

/* A window's: subscribes unless another tool holds CUPTI's one subscriber
 * (then says whom, and CUDA calls come from ptbpf's uprobes), and switches
 * the launch callbacks on; on the kept map's subscriber where it has one. */
void subscribe_locked(void)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
	CUptiResult res;
	unsigned ok = 0;

	if (subscriber && launches_on)
		return;
	if (!subscriber && (res = new_subscriber_locked(other, sizeof(other))) != CUPTI_SUCCESS) {
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0, "no CUDA call callbacks: cuptiSubscribe: "
			     "%s%s%s", cupti_error(res), other[0] ? ": held by " : "", other);
		return;
	}
	launches_on = true;
	for (size_t i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++)
		ok += p_enable_callback(1, subscriber, launch_cbids[i].domain,
					launch_cbids[i].cbid) == CUPTI_SUCCESS;
	if (!ok)
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0,
			     "cuptiEnableCallback failed for every launch API");
	if (api_to_rings)
		for (CUpti_CallbackId id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; id++)
			if (!left_out(id))
				p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
}

/* The kept map's, between windows: the graph callbacks alone (a window's
 * launch callbacks go with its subscriber: never switched off on a live
 * one, above). */
bool subscribe_graphs_locked(char *why, size_t len)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
	CUptiResult res;

	if (subscriber)
		return true;
	if (!p_graph_node_id || !p_graph_id) {
		snprintf(why, len, "this CUPTI has no cuptiGetGraphNodeId/cuptiGetGraphId");
		return false;
	}
	if ((res = new_subscriber_locked(other, sizeof(other))) != CUPTI_SUCCESS) {
		snprintf(why, len, "cuptiSubscribe: %s%s%s", cupti_error(res),
			 other[0] ? ": held by " : "", other);
		return false;
	}
	launches_on = false;
	return true;
}

/* At a window's end: its launch callbacks go with its subscriber (never
 * switched off on a live one); the kept map's own, without them, stays. */
void window_unsubscribe_locked(bool keep)
{
	if (!(keep && subscriber && !launches_on))
		unsubscribe_locked();
}

void unsubscribe_locked(void)
{
	if (subscriber)
		p_unsubscribe(subscriber);
	subscriber = NULL;
	launches_on = false;
}

/* The job's own CUPTI user is about to subscribe or to start an activity
 * session: CUPTI's callbacks are its from now on, before its call goes on
 * (a subscription changed while its session runs can crash the job). */
void give_up_subscriber_locked(const char *why)
{
	bool window = launches_on;

	/* The kept capture map never subscribes again (cupti.c), nor in the
	 * moment between this hook and the job's own call. */
	job_took_cupti = true;
	if (graphs_is_on())
		graphs_lost("the job's own CUPTI user (torch.profiler's Kineto) took CUPTI's "
			    "callbacks");
	if (!subscriber)
		return;
	unsubscribe_locked();
	if (window)
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0, "the job %s (torch.profiler's Kineto): "
			     "CUPTI's callbacks are its now; CUDA calls come from ptbpf's uprobes, "
			     "without launch->kernel flows", why);
}

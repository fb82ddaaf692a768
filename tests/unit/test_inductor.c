// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unit test of user/record/inductor.c: Triton kernels' sources from the
 * Inductor cache of a process, here this one (tests/test_unit.py starts it
 * with TORCHINDUCTOR_CACHE_DIR naming a cache it made from real output
 * code of the H200, plus made-up modules for the choices).
 *
 *   test_inductor CACHE_DIR
 *
 * CACHE_DIR/aa/forward.py, CACHE_DIR/bb/backward.py: torch 2.11's output
 * code; CACHE_DIR/cc/old.py (older) defines triton_a_0 (aten.add) and
 * triton_b_1 (aten.mul); CACHE_DIR/dd/new.py defines triton_b_1
 * (aten.sub); CACHE_DIR/ee/other.py is another user's (not read);
 * CACHE_DIR/ff/kernel.py is a kernel's source (no output code).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "record/inductor.h"

static bool eq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static int found_calls;

static void on_found(void *ctx, int pid, const char *name, const struct inductor_kernel *k)
{
	(void)ctx;
	(void)name;
	found_calls += pid == getpid() && k->module != NULL;
}

int main(int argc, char **argv)
{
	const struct inductor_kernel *k;
	const struct inductor_counts *c;
	struct inductor *ix = inductor_new(), *fresh = inductor_new(), *replay = inductor_new();
	int pid = getpid();
	char path[4096];
	FILE *f;

	if (argc != 2 || !ix || !fresh || !replay) {
		fprintf(stderr, "usage: test_inductor CACHE_DIR\n");
		return 2;
	}
	inductor_on_found(ix, on_found, NULL);

	/* Real output code: a forward and a backward module. */
	inductor_name(ix, pid, "triton_poi_fused_gelu_1");
	k = inductor_get(ix, pid, "triton_poi_fused_gelu_1");
	CHECK(k && eq(k->aten, "aten::gelu") && eq(k->nodes, "gelu"), "gelu's sources", 0);
	snprintf(path, sizeof(path), "%s/aa/forward.py", argv[1]);
	CHECK(k && eq(k->module, path), "gelu's module, as the job names it", 0);
	CHECK(k && eq(k->graph, "0_forward"), "gelu's graph (AOT ID)", 0);
	inductor_name(ix, pid, "triton_per_fused_add_addmm_native_layer_norm_native_layer_norm_backward_4");
	k = inductor_get(ix, pid, "triton_per_fused_add_addmm_native_layer_norm_native_layer_norm_backward_4");
	CHECK(k && eq(k->aten, "aten::add, aten::addmm, aten::native_layer_norm, "
			       "aten::native_layer_norm_backward"), "four ATen ops", 0);
	CHECK(k && eq(k->nodes, "input_1, linear_3, input_2, linear_5, input_3, layer_norm_3, div"),
	      "seven source nodes", 0);
	inductor_name(ix, pid, "triton_per_fused_sum_0");
	k = inductor_get(ix, pid, "triton_per_fused_sum_0");
	CHECK(k && eq(k->aten, "aten::sum") && eq(k->nodes, "sum_1"), "the backward's sum", 0);
	CHECK(k && eq(k->graph, "0_backward"), "the backward's graph", 0);

	/* Not Inductor's: not looked up, or looked up and not found. */
	inductor_name(ix, pid, "void at::native::vectorized_elementwise_kernel<4>");
	CHECK(!inductor_get(ix, pid, "void at::native::vectorized_elementwise_kernel<4>"),
	      "a CUDA kernel has no sources", 0);
	inductor_name(ix, pid, "triton_user_kernel");
	CHECK(!inductor_get(ix, pid, "triton_user_kernel"), "a Triton kernel of no module", 0);
	CHECK(!inductor_get(ix, pid + 1, "triton_poi_fused_gelu_1"), "another process's", 0);

	/* A name two modules define: the one most of the process's kernels
	 * came from, then the newer. */
	inductor_name(ix, pid, "triton_a_0");
	inductor_name(ix, pid, "triton_b_1");
	k = inductor_get(ix, pid, "triton_b_1");
	CHECK(k && eq(k->aten, "aten::mul") && !k->graph, "b_1 from the module a_0 came from", 0);
	inductor_name(fresh, pid, "triton_b_1");
	k = inductor_get(fresh, pid, "triton_b_1");
	CHECK(k && eq(k->aten, "aten::sub"), "b_1 alone: from the newer module", 0);

	c = inductor_counts(ix);
	CHECK(c->names == 6 && c->found == 5, "names looked up, found", c->names * 100 + c->found);
	CHECK(c->modules == 4, "output code modules read (not the kernel's source)", c->modules);
	CHECK(c->modules_skipped == 1, "another user's module skipped", c->modules_skipped);
	CHECK(found_calls == 5, "each kernel found said once", found_calls);

	/* A module written after the first read: read on a miss, a second on. */
	snprintf(path, sizeof(path), "%s/gg/late.py", argv[1]);
	f = fopen(path, "w");
	CHECK(f != NULL, "write a late module", 0);
	if (f) {
		fputs("# Topologically Sorted Source Nodes: [x], Original ATen: [aten.relu]\n"
		      "triton_late_2 = async_compile.triton('triton_late_2', '''\n", f);
		fclose(f);
	}
	/* gg was read whole (tests/test_unit.py made the cache over 2 s
	 * before); past the 2 s in which a changed directory is always looked
	 * in, only the change of its ctime says to look in it again. */
	sleep(2);
	usleep(200000);
	inductor_name(ix, pid, "triton_late_2");
	k = inductor_get(ix, pid, "triton_late_2");
	CHECK(k && eq(k->aten, "aten::relu"), "a late module read on a miss", 0);

	/* Replay: what a capture kept, no files read. */
	inductor_replay(replay);
	inductor_name(replay, pid, "triton_poi_fused_gelu_1");
	CHECK(!inductor_get(replay, pid, "triton_poi_fused_gelu_1"), "replay reads no files", 0);
	inductor_add(replay, pid, "triton_poi_fused_gelu_1",
		     &(struct inductor_kernel){ .aten = "aten::gelu", .module = "/m.py" });
	k = inductor_get(replay, pid, "triton_poi_fused_gelu_1");
	CHECK(k && eq(k->aten, "aten::gelu") && !k->nodes && eq(k->module, "/m.py"),
	      "replay's kernel as kept", 0);

	inductor_free(ix);
	inductor_free(fresh);
	inductor_free(replay);
	return check_summary("test_inductor");
}

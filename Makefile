# SPDX-License-Identifier: BSD-2-Clause
# ptbpf: BPF objects (CO-RE, against vmlinux/) -> skeletons -> a loader
# linked statically against libbpf/libelf/zlib/zstd/capstone, so the same
# binary runs on the GPU machine.
OUTPUT ?= build
CLANG ?= clang
CC ?= gcc
BPFTOOL ?= bpftool
ARCH := x86
# The version: `git describe` of this tree (tags v*), else 0.1.0 and the commit.
VERSION := $(shell v=$$(git describe --tags --match 'v*' --dirty 2>/dev/null) && echo $${v\#v} || \
	     { c=$$(git describe --always --dirty 2>/dev/null) && echo 0.1.0-g$$c; } || echo 0.1.0)

CFLAGS ?= -O2 -g
ALL_CFLAGS := $(CFLAGS) -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Iinclude -Iuser -I$(OUTPUT) \
	  -MMD -MP
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ivmlinux/$(ARCH) -Wall
LDLIBS := -lbpf -lelf -lz -lzstd -lcapstone -ljson-c -levent_openssl -levent_extra -levent_pthreads -levent_core -lssl -lcrypto -lyaml -lcrypt -lstdc++ -lm -pthread
LDFLAGS ?= -static

BPF_SRCS := $(wildcard bpf/*.bpf.c)
SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))
# user/agent/ is the in-process agent library; the rest is ptbpf (the
# loader): user/main.c and cli.c, then one folder per part
# (docs/architecture.md).
AGENT_SRCS := $(wildcard user/agent/*.c)
USER_DIRS := live attach record trace report offline fleet lib
USER_SRCS := $(wildcard user/*.c) $(foreach d,$(USER_DIRS),$(wildcard user/$(d)/*.c))
OBJ := $(OUTPUT)/obj
USER_OBJS := $(patsubst user/%.c,$(OBJ)/%.o,$(USER_SRCS))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(OUTPUT)/%,$(wildcard tests/unit/test_*.c))
TESTPROGS := $(OUTPUT)/simfail $(OUTPUT)/cuda_rt $(OUTPUT)/cuda_drv $(OUTPUT)/hip_calls $(OUTPUT)/cupti_race \
	     $(OUTPUT)/stubs/libcuda.so.1 $(OUTPUT)/inject_target $(OUTPUT)/vfork_hold $(OUTPUT)/inject_lib.so \
	     $(OUTPUT)/stubs/libnccl.so.2 $(OUTPUT)/nccl_calls \
	     $(OUTPUT)/inject_cli $(OUTPUT)/exit_at_agent.so $(OUTPUT)/loader_walk.so
# The benchmark's floors (tests/bench): empty callbacks, a counting uprobe,
# the kernel view switched on and off; the agent's op recorder alone.
BENCHPROGS := $(OUTPUT)/libptbpf-floor.so $(OUTPUT)/uprobe_floor $(OUTPUT)/sched_floor \
	      $(OUTPUT)/ring_bench \
	      $(OUTPUT)/tsc_check $(OUTPUT)/tools/bpftool
CUDA ?= /usr/local/cuda-13.0
AGENT := $(OUTPUT)/libptbpf-agent.so
# No endbr64, so each ptbpf_agent_* entry starts with an instruction x86
# uprobes emulate (user/agent/agent.c); frame pointers for BPF stack walks.
AGENT_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fPIC -shared \
		-fvisibility=hidden -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
		-fcf-protection=none -Iinclude \
		-I$(CUDA)/extras/CUPTI/include -I$(CUDA)/include

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all test-progs FORCE clean deps test bench demo examples install uninstall gpu-check gpu-bench gpu-cost gpu-ratio gpu-check-multi gpu-soak pb2 fuzz
.DELETE_ON_ERROR:
.SECONDARY:

# `make` builds ptbpf and the agent; the programs tests and benchmarks run
# (some need nvcc, HIP or libtorch) are built by `make test-progs`.
all: $(OUTPUT)/ptbpf $(AGENT)

test-progs: $(UNIT_TESTS) $(TESTPROGS) $(BENCHPROGS)

$(OUTPUT):
	$(Q)mkdir -p $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.bpf.h) $(wildcard include/*.h) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# Header dependencies come from the compiler (-MMD -MP); the generated
# headers must exist before the first compile.
$(OBJ)/%.o: user/%.c | $(SKELS) $(OUTPUT)/version.h $(OUTPUT)/report_assets.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

-include $(USER_OBJS:.o=.d) $(UNIT_TESTS:=.d)

# Rewritten only when the version changes, so that only cli.c rebuilds.
$(OUTPUT)/version.h: FORCE | $(OUTPUT)
	$(Q)echo '#define PTBPF_VERSION "$(VERSION)"' > $@.tmp
	$(Q)cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
FORCE:

# The report page's HTML, CSS and script, built into ptbpf (report --html).
HTML := user/report/html
PAGE_FILES := $(HTML)/report.html $(HTML)/report.css $(HTML)/report.js
$(OUTPUT)/report_assets.h: $(HTML)/embed.sh $(PAGE_FILES) | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)sh $(HTML)/embed.sh report_page_html=$(HTML)/report.html \
		report_page_css=$(HTML)/report.css report_page_js=$(HTML)/report.js > $@

$(OUTPUT)/ptbpf: $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The in-process CUPTI agent; libcupti is dlopen'd, so only its headers
# are needed here.
$(AGENT): $(AGENT_SRCS) $(wildcard user/agent/*.h) include/ptbpf_agent.h include/ptbpf_events.h | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(AGENT_CFLAGS) $(AGENT_SRCS) -o $@ -Wl,-z,defs -ldl -pthread

# C unit tests link the loader's modules except main.o. test_links stands
# in for the link keeper (it counts the order links go in) and libbpf.
$(OUTPUT)/test_links: LDLIBS += -Wl,--wrap=keeper_attach,--wrap=keeper_destroy \
	-Wl,--wrap=bpf_link__destroy,--wrap=bpf_program__fd
$(OUTPUT)/test_%: tests/unit/test_%.c $(filter-out $(OBJ)/main.o,$(USER_OBJS))
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(filter %.c %.o,$^) $(LDLIBS) -o $@

# Test targets (real programs ptbpf attaches to).
$(OUTPUT)/simfail: tests/progs/simfail.cpp | $(OUTPUT)
	$(call msg,CXX,$@)
	$(Q)g++ -O1 -g -std=c++17 -I/usr/include/torch/csrc/api/include $< -o $@ \
		-ltorch -ltorch_cpu -lc10 -pthread

# GPU-call targets: no GPU or driver is needed, the calls just fail.
$(OUTPUT)/cuda_rt: tests/progs/cuda_rt.cu | $(OUTPUT)
	$(call msg,NVCC,$@)
	$(Q)$(CUDA)/bin/nvcc -O1 -g -cudart shared -Xlinker -rpath -Xlinker $(CUDA)/lib64 $< -o $@

# CUPTI's callbacks changed beside a thread in CUDA calls (tests/gpu):
# linked against the toolkit's libcupti and libcudart, the job's on the GPU.
$(OUTPUT)/cupti_race: tests/progs/cupti_race.cu | $(OUTPUT)
	$(call msg,NVCC,$@)
	$(Q)$(CUDA)/bin/nvcc -O1 -g -cudart shared -I$(CUDA)/extras/CUPTI/include $< -o $@ \
		-L$(CUDA)/lib64 -lcupti -Xlinker -rpath -Xlinker $(CUDA)/lib64

# The toolkit's stub libcuda (SONAME libcuda.so.1), found through the rpath.
$(OUTPUT)/stubs/libcuda.so.1: $(CUDA)/lib64/stubs/libcuda.so
	$(Q)mkdir -p $(dir $@)
	$(Q)ln -sf $< $@

$(OUTPUT)/cuda_drv: tests/progs/cuda_drv.c $(OUTPUT)/stubs/libcuda.so.1
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -I$(CUDA)/include $< -o $@ -L$(CUDA)/lib64/stubs -lcuda \
		-Wl,-rpath,$(abspath $(OUTPUT)/stubs)

# CI has no NCCL: a stand-in libnccl.so.2 with NCCL's entry points.
$(OUTPUT)/stubs/libnccl.so.2: tests/progs/nccl_stub.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O1 -g -Wall -fPIC -shared -fvisibility=hidden -Wl,-soname,libnccl.so.2 $< -o $@

$(OUTPUT)/nccl_calls: tests/progs/nccl_calls.c $(OUTPUT)/stubs/libnccl.so.2
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall $< -o $@ $(OUTPUT)/stubs/libnccl.so.2 \
		-Wl,-rpath,$(abspath $(OUTPUT)/stubs)

$(OUTPUT)/hip_calls: tests/progs/hip_calls.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -D__HIP_PLATFORM_AMD__ $< -o $@ -lamdhip64

# Injection: a multithreaded target, the library put into it, and a driver.
$(OUTPUT)/inject_target: tests/progs/inject_target.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -Wextra -Wno-unused-parameter $< -o $@ -pthread -lm

$(OUTPUT)/vfork_hold: tests/progs/vfork_hold.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -Wextra $< -o $@ -pthread

$(OUTPUT)/inject_lib.so: tests/progs/inject_lib.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -Wextra -shared -fPIC $< -o $@

$(OUTPUT)/loader_walk.so: tests/progs/loader_walk.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -Wextra -shared -fPIC $< -o $@

# A target that exits inside ptbpf's attach (LD_PRELOAD).
$(OUTPUT)/exit_at_agent.so: tests/progs/exit_at_agent.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -Wall -Wextra -Wno-unused-parameter -shared -fPIC $< -o $@

INJECT_CLI_OBJS := $(addprefix $(OBJ)/,attach/inject.o attach/inject_prep.o attach/inject_tramp.o lib/elfsym.o lib/elfsym_find.o \
		   attach/exitsites.o attach/opnames.o lib/names.o lib/hash.o attach/target.o \
		   lib/procmaps.o lib/text.o)
$(OUTPUT)/inject_cli: tests/progs/inject_cli.c $(INJECT_CLI_OBJS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# This machine's bpftool, to carry to a GPU machine that has none.
$(OUTPUT)/tools/bpftool: tests/gpu/bundle_bpftool.sh | $(OUTPUT)
	$(call msg,CP,$@)
	$(Q)tests/gpu/bundle_bpftool.sh $(OUTPUT)/tools

$(OUTPUT)/libptbpf-floor.so: tests/bench/floor.c user/agent/rf_abi.h user/agent/launch_cbids.h | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(AGENT_CFLAGS) -Iuser/agent $< -o $@ -ldl

$(OUTPUT)/ring_bench: tests/bench/ring_bench.c $(AGENT_SRCS) $(wildcard user/agent/*.h) include/ptbpf_agent.h | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall -Wno-unused-function -fcf-protection=none -Iinclude \
		-Iuser/agent $< -o $@ -ldl -pthread

$(OUTPUT)/tsc_check: tests/bench/tsc_check.c | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 -Wall $< -o $@ -pthread

$(OUTPUT)/uprobe_floor.bpf.o: tests/bench/uprobe_floor.bpf.c | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/uprobe_floor: tests/bench/uprobe_floor.c $(OUTPUT)/uprobe_floor.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $< $(LDLIBS) $(LDFLAGS) -o $@

# The kernel view switched on and off (bench.py --paired sched:switch,
# sched_nosys:switch): ptbpf's own sched_probes.c, so linked with the
# loader's modules.
$(OUTPUT)/sched_floor: tests/bench/sched_floor.c $(filter-out $(OBJ)/main.o,$(USER_OBJS))
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) $(LDFLAGS) -o $@

# Fuzzers of every reader (report, export, merge, replay): libFuzzer with
# ASan and UBSan (clang, libclang-rt-dev), the loader's modules rebuilt so.
# `make fuzz` runs each for FUZZ_SECONDS from its corpus (tests/fuzz/corpus,
# the regression inputs) and fails on any finding.
FUZZ_SECONDS ?= 20
FUZZ_DIR := $(OUTPUT)/fuzz
FUZZ_CFLAGS := -O1 -g -std=gnu11 -fno-omit-frame-pointer -fsanitize=address,undefined \
	       -fno-sanitize-recover=undefined -Iinclude -Iuser -I$(OUTPUT) -MMD -MP
FUZZ_OBJS := $(patsubst user/%.c,$(FUZZ_DIR)/%.o,$(filter-out user/main.c,$(USER_SRCS)))
FUZZERS := $(patsubst tests/fuzz/%.c,$(FUZZ_DIR)/%,$(wildcard tests/fuzz/fuzz_*.c))

$(FUZZ_DIR)/%.o: user/%.c | $(SKELS) $(OUTPUT)/version.h $(OUTPUT)/report_assets.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

-include $(FUZZ_OBJS:.o=.d)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_OBJS)
	$(call msg,FUZZ-LD,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJS) \
		-lbpf -lelf -lz -lzstd -lcapstone -ljson-c -levent_openssl -levent_extra -levent_pthreads -levent_core -lssl -lcrypto -lyaml -lcrypt \
		-lstdc++ -lm -pthread -o $@

fuzz: $(FUZZERS)
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZERS)

deps:
	tests/install-deps.sh

test: all test-progs
	/usr/bin/python3 -m pytest -v -rfE --ignore=tests/gpu tests/

# The interleaved benchmark on this machine: its dated section is appended
# to the journal; a figure it changes is then updated in BENCHMARKS.md.
bench: all test-progs
	/usr/bin/python3 tests/bench/bench.py \
		--paired steps,steps:switch,rf7,rf7:switch,sched:switch,sched_nosys:switch \
		--loader-ops 1000000 --loader-s 60 --out docs/benchmarks-history.md

demo: all
	tests/demo.sh

# docs/examples/ re-made from a real run of the demo: its stderr, its
# report, the report page's screenshots (Debian's chromium, headless).
examples: all
	/usr/bin/python3 tests/examples.py

# ptbpf looks for its agent next to its own executable (/proc/self/exe,
# links resolved: user/attach/agent_ctl.c), so both go to lib/ptbpf and
# bin/ptbpf is a link to it; the man page to man8.
PREFIX ?= /usr/local
LIBDIR := $(DESTDIR)$(PREFIX)/lib/ptbpf
install: all
	install -d $(LIBDIR) $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(OUTPUT)/ptbpf $(LIBDIR)/ptbpf
	install -m 0644 $(AGENT) $(LIBDIR)/libptbpf-agent.so
	ln -sfn ../lib/ptbpf/ptbpf $(DESTDIR)$(PREFIX)/bin/ptbpf
	install -m 0644 docs/ptbpf.8 $(DESTDIR)$(PREFIX)/share/man/man8/ptbpf.8

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/ptbpf $(DESTDIR)$(PREFIX)/share/man/man8/ptbpf.8 \
		$(LIBDIR)/ptbpf $(LIBDIR)/libptbpf-agent.so
	rmdir $(LIBDIR) 2>/dev/null || true

# On the GPU machine, with a ptbpf built elsewhere (make all test-progs pb2) and carried.
# The machine has no bpftool: the carried one (build/tools) comes last on PATH.
GPU_PATH := PATH="$$PATH:$(abspath $(OUTPUT)/tools)"
gpu-check:
	$(GPU_PATH) tests/gpu/gpu_check.sh

# On the GPU machine: the interleaved benchmark alone (about 6 minutes), its
# Markdown section appended to $OUT/bench-gpu.md (OUT defaults to .).
gpu-bench:
	py=$${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3}; \
	$(GPU_PATH) $$py tests/bench/bench.py --device cuda --python $$py \
		--paired steps,steps:switch,rf7,rf7:switch,sched:switch,sched_nosys:switch --out $${OUT:-.}/bench-gpu.md

# On the GPU machine: issue 23's direct costs, per op and per launch
# (tests/bench/step_signal_cost.py, paired), in two processes: Kineto keeps
# CUPTI's subscriber after the profiler's first session, so the profiler is
# measured apart from the CUPTI floors and ptbpf's launch path. Each half
# starts no cycle after COST_SECONDS (170: both fit one 10-minute device
# call, about 4 cycles each on the H200); $OUT/cost-ops.log and
# $OUT/cost-launch.log.
gpu-cost:
	py=$${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3}; out=$${OUT:-.}; \
	cost="$$py tests/bench/step_signal_cost.py --device cuda --paired 1000 --cycles 15 \
		--max-seconds $${COST_SECONDS:-170} --phases none,all_cb"; \
	$(GPU_PATH) $$cost,w_agent_tsc,w_ring,w_ring_read,ptbpf_ops,profiler \
		> $$out/cost-ops.log 2>&1; a=$$?; \
	$(GPU_PATH) $$cost,cupti_act,cupti_both,ptbpf_calls,ptbpf_ops \
		> $$out/cost-launch.log 2>&1; b=$$?; \
	grep -E "^# .*(/ profiler|above its op /)" $$out/cost-ops.log $$out/cost-launch.log; \
	[ $$a = 0 ] && [ $$b = 0 ]

# On the GPU machine: issue 23's step ratio, ptbpf's overhead over the
# profiler's with each tool on for one block of each pair (bench.py
# --paired ptbpf,profiler), and in the same blocks' phase every floor at
# once (floors:switch: the empty callback, CUPTI's callbacks and activity)
# and the agent's per-op facts alone (w_ring_read:switch), each over the
# profiler's too; WORKLOAD step or transformer, 12 cycles or as many as
# start within 470 s (one device call), the section appended to
# $OUT/ratio-WORKLOAD.md.
gpu-ratio:
	py=$${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3}; w=$${WORKLOAD:-step}; \
	$(GPU_PATH) $$py tests/bench/bench.py --device cuda --python $$py --workloads $$w \
		--floors rf1 --paired ptbpf,profiler,floors:switch,w_ring_read:switch \
		--whole-pairs 10 --cycles 12 --max-seconds 470 \
		--json $${OUT:-.}/ratio-$$w.json --out $${OUT:-.}/ratio-$$w.md

# On the GPU machine: issue 19's soak round (cycles, daemon windows, first
# attaches, RSS by way of ending ptbpf), results under $OUT; two GPUs for
# DDP on NCCL. About 7 minutes.
gpu-soak:
	$(GPU_PATH) tests/soak/gpu_soak.sh

# On a machine with two GPUs: the NCCL DDP job, traced and merged.
gpu-check-multi:
	$(GPU_PATH) PTBPF_TEST_PYTHON=$${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3} \
	PTBPF_PB2_DIR=$(abspath $(OUTPUT)/pb2) \
	$${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3} -m pytest -v -s -rfE \
		-p no:cacheprovider tests/gpu/multi

# The trace schema as a Python module, for machines without protoc.
pb2: $(OUTPUT)/pb2/perfetto_trace_pb2.py

$(OUTPUT)/pb2/perfetto_trace_pb2.py: user/trace/perfetto_trace.proto
	$(Q)mkdir -p $(dir $@)
	$(Q)protoc -I user/trace --python_out $(dir $@) perfetto_trace.proto

clean:
	rm -rf $(OUTPUT)

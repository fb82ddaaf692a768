// SPDX-License-Identifier: BSD-2-Clause
/*
 * simfail: a libtorch program that makes traced op frames fail in every way
 * ptbpf must survive. It overrides the CPU kernels of a few real ATen ops
 * (so their at::_ops::<op>::call entry points are traced), and those kernels:
 *   dot   catches an exception thrown by a nested op, then returns normally;
 *   vdot  catches it and rethrows;
 *   trace recurses through the dispatcher N levels deep;
 *   histc calls pthread_exit() inside the op, on a worker thread.
 * Usage: simfail MODE ITERATIONS [GO_FILE]
 * MODE: catch | rethrow | nested | recurse | pthread_exit | all
 * Prints "ready" and waits until GO_FILE exists (so a tracer can attach),
 * then prints one deterministic result line per mode.
 */
#include <torch/torch.h>
#include <torch/library.h>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

static int recurse_depth;

static at::Tensor bad_mm()
{
	// Shapes that cannot multiply: at::mm throws c10::Error.
	return at::mm(at::ones({2, 3}), at::ones({4, 5}));
}

static at::Tensor dot_catching(const at::Tensor &a, const at::Tensor &b)
{
	try {
		bad_mm();
	} catch (const c10::Error &) {
		// The outer op survives the nested op's exception.
	}
	return (a * b).sum();
}

static at::Tensor vdot_rethrowing(const at::Tensor &a, const at::Tensor &b)
{
	try {
		bad_mm();
	} catch (const c10::Error &) {
		throw;
	}
	return (a * b).sum();
}

static at::Tensor trace_recursing(const at::Tensor &self)
{
	if (recurse_depth-- > 0)
		return at::trace(self);
	return self.sum();
}

static at::Tensor histc_exiting(const at::Tensor &, int64_t, const at::Scalar &,
				const at::Scalar &)
{
	pthread_exit(nullptr);
}

TORCH_LIBRARY_IMPL(aten, CPU, m)
{
	m.impl("dot", dot_catching);
	m.impl("vdot", vdot_rethrowing);
	m.impl("trace", trace_recursing);
	m.impl("histc", histc_exiting);
}

static void *histc_thread(void *)
{
	at::histc(at::ones({4}));
	return nullptr; // never reached: histc exits the thread
}

static void run(const std::string &mode, int iters, int depth)
{
	at::Tensor v = at::ones({8});
	long caught = 0, done = 0;

	for (int i = 0; i < iters; i++) {
		if (mode == "catch") {
			done += at::dot(v, v).item<float>() == 8.0f;
		} else if (mode == "rethrow") {
			try {
				at::vdot(v, v);
			} catch (const c10::Error &) {
				caught++;
			}
		} else if (mode == "nested") {
			try {
				// linear -> matmul -> mm: thrown three ops deep.
				at::linear(at::ones({2, 3}), at::ones({4, 5}));
			} catch (const c10::Error &) {
				caught++;
			}
		} else if (mode == "recurse") {
			recurse_depth = depth;
			done += at::trace(at::eye(3)).item<float>() == 3.0f;
		} else if (mode == "pthread_exit") {
			pthread_t t;

			pthread_create(&t, nullptr, histc_thread, nullptr);
			pthread_join(t, nullptr);
			done++;
		}
	}
	std::printf("%s: iterations %d, ok %ld, caught %ld\n", mode.c_str(), iters, done, caught);
}

int main(int argc, char **argv)
{
	const char *modes[] = { "catch", "rethrow", "nested", "recurse", "pthread_exit" };
	std::string mode = argc > 1 ? argv[1] : "all";
	int iters = argc > 2 ? std::atoi(argv[2]) : 10;
	struct stat st;

	std::printf("ready\n");
	std::fflush(stdout);
	while (argc > 3 && stat(argv[3], &st) != 0)
		usleep(10000);
	for (const char *m : modes)
		if (mode == "all" || mode == m)
			run(m, iters, 100);
	return 0;
}

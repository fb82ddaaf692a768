// SPDX-License-Identifier: BSD-2-Clause
/* CUDA names, callback ids and occupancy for the Kineto export. See cuda_info.h. */
#include "offline/cuda_info.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

const char *cuda_memcpy_kind(int64_t kind)
{
	static const char *const names[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					     "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

	return kind >= 0 && kind < (int64_t)(sizeof(names) / sizeof(names[0])) ? names[kind] :
									      "Unknown";
}

const char *cuda_memory_kind(int64_t kind)
{
	static const char *const names[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
					     "Managed", "Device Static", "Managed Static" };

	return kind >= 0 && kind < (int64_t)(sizeof(names) / sizeof(names[0])) ? names[kind] :
									      "Unknown";
}

static int div_up(int x, int y)
{
	return (x + y - 1) / y;
}

static int round_up(int x, int y)
{
	return y * div_up(x, y);
}

static int max_blocks_per_sm(const struct cuda_device *d)
{
	switch (d->major) {
	case 7: return d->minor == 5 ? 16 : 32;
	case 8: return d->minor == 0 ? 32 : d->minor == 9 ? 24 : 16;
	case 9: return 32;
	case 10: return d->minor == 1 ? 24 : 32;
	case 11: return d->minor == 0 ? 24 : 32;
	case 12: return 24;
	default: return 0;
	}
}

/* The shared memory carveout an SM is configured to that holds size
 * bytes (cudaOccAlignUpShmemSizeVoltaPlus); -1 if none does. */
static int64_t carveout(const struct cuda_device *d, int64_t size)
{
	static const int volta[] = { 0, 8, 16, 32, 64, 96 }, turing[] = { 32, 64 },
			 ga100[] = { 0, 8, 16, 32, 64, 100, 132, 164 },
			 ga10x[] = { 0, 8, 16, 32, 64, 100 },
			 hopper[] = { 0, 8, 16, 32, 64, 100, 132, 164, 196, 228 };
	const int *kb;
	size_t n;

#define USE(a) (kb = (a), n = sizeof(a) / sizeof((a)[0]))
	if (d->major == 7)
		d->minor == 5 ? USE(turing) : USE(volta);
	else if (d->major == 8)
		d->minor == 0 || d->minor == 7 ? USE(ga100) : USE(ga10x);
	else if (d->major >= 9 && d->major <= 11)
		USE(hopper);
	else
		USE(ga10x);
#undef USE
	for (size_t i = 0; i < n; i++)
		if (size <= kb[i] * 1024LL)
			return kb[i] * 1024LL;
	return -1;
}

int cuda_occupancy_pct(const struct cuda_device *d, uint64_t grid_blocks, int block_threads,
		       int regs_per_thread, int64_t smem_per_block)
{
	int warps, regs_warp, regs_cta, regs_assumed, lim_regs, lim_warps, lim_smem, lim;
	int64_t smem_cta, smem_sm;
	double blocks_per_sm;

	if (!d || d->major < 7 || d->sms <= 0 || d->warp_size <= 0 || d->warp_size > 1024 ||
	    block_threads <= 0 || d->max_threads_per_sm <= 0 || d->regs_per_sm <= 0 ||
	    d->max_threads_per_block <= 0 || regs_per_thread < 0 || smem_per_block < 0 ||
	    d->smem_reserved_per_block < 0 || d->smem_reserved_per_block > (1 << 20))
		return -1;
	if (block_threads > d->max_threads_per_block || regs_per_thread > 256 ||
	    smem_per_block > (1 << 30))
		return 0; /* it cannot run: no block fits */
	blocks_per_sm = (double)grid_blocks / d->sms;
	warps = div_up(block_threads, d->warp_size);
	/* registers: allocated per warp in units of 256, per sub-partition (4) */
	regs_warp = round_up(regs_per_thread * d->warp_size, 256);
	regs_cta = regs_warp * warps;
	regs_assumed = regs_warp * round_up(warps, 4);
	if (d->regs_per_block < regs_assumed || d->regs_per_block < regs_cta ||
	    regs_per_thread > 256)
		lim_regs = 0;
	else
		lim_regs = regs_warp ? (d->regs_per_sm / 4 / regs_warp) * 4 / warps : INT_MAX;
	lim_warps = block_threads > d->max_threads_per_block ? 0 :
		    d->max_threads_per_sm / d->warp_size / warps;
	/* shared memory: in units of 128 bytes, with the driver's reserve */
	smem_cta = round_up((int)(smem_per_block + d->smem_reserved_per_block), 128);
	if (smem_cta > d->smem_per_block + d->smem_reserved_per_block) {
		lim_smem = 0;
	} else {
		smem_sm = carveout(d, d->smem_per_sm);
		if (smem_sm < smem_cta)
			smem_sm = carveout(d, smem_cta);
		lim_smem = smem_sm < 0 ? 0 : smem_cta ? (int)(smem_sm / smem_cta) : INT_MAX;
	}
	lim = max_blocks_per_sm(d);
	lim = lim_regs < lim ? lim_regs : lim;
	lim = lim_warps < lim ? lim_warps : lim;
	lim = lim_smem < lim ? lim_smem : lim;
	if (lim < blocks_per_sm)
		blocks_per_sm = lim;
	return (int)(0.5 + blocks_per_sm * block_threads / d->max_threads_per_sm * 100.0);
}

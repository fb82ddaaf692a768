# SPDX-License-Identifier: BSD-2-Clause
"""Statistics the benchmarks share."""


def median_interval(v):
    """A 95% interval of the median of v: the order statistics at
    n/2 -+ 0.98 sqrt(n) (the normal approximation of the binomial)."""
    v = sorted(v)
    n = len(v)
    k = 0.98 * n ** 0.5
    return v[max(0, int(n / 2 - k))], v[min(n - 1, int(n / 2 + k))]

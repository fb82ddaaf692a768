/* SPDX-License-Identifier: BSD-2-Clause */
/* Which processes --all and daemon windows trace (user/fleet/select.c):
 * --match-env, and a triggered window's job/rank filter. */
#ifndef PTBPF_SELECT_H
#define PTBPF_SELECT_H

#include <stdbool.h>

#include "cli.h"
#include "fleet/capture.h"

/* Whether pid's environment has every --match-env KEY=VALUE of opt and,
 * for a trigger with a filter, matches one of its job/rank pairs. true
 * when there is nothing to check; false for a process whose environment
 * cannot be read while there is. */
bool select_process(const struct options *opt, const struct capture_req *trigger, int pid);

#endif /* PTBPF_SELECT_H */

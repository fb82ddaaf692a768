// SPDX-License-Identifier: BSD-2-Clause
/*
 * The link keeper. See keeper.h. ptbpf starts it (posix_spawn of
 * /proc/self/exe, a fresh image: none of ptbpf's maps, threads or files)
 * with one end of a socket pair on fd 3 and asks it, one request at a
 * time, to make or take out links; it holds the link fds, so it alone
 * writes and restores the breakpoints. End of file on the socket (ptbpf
 * exited, was killed, or called _exit) makes it take out what it holds,
 * those that begin slices first, and exit.
 */
#define _GNU_SOURCE
#include "attach/keeper.h"
#include "attach/target.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <linux/limits.h>

/* Debian 12's <linux/bpf.h> (6.1) predates uprobe.multi (6.6); libbpf
 * 1.4 passes these through. */
#define ATTACH_UPROBE_MULTI ((enum bpf_attach_type)48) /* BPF_TRACE_UPROBE_MULTI */
#define UPROBE_MULTI_RETURN 1u                         /* BPF_F_UPROBE_MULTI_RETURN */

#define KEEPER_FD 3
#define MAX_SITES (1 << 22)
/* Links taken out at once, each on a thread of its own: taking a uprobe
 * out waits for an RCU grace period; on kernel 6.18 (CI VM) 8
 * uprobe.multi links took 459 ms one after another and 84 ms at once. */
#define PARALLEL_MAX 64

enum { KEEPER_ATTACH = 1, KEEPER_DESTROY = 2 };

struct keeper_req {
	uint32_t op;
	int32_t pid;       /* ATTACH: the process the probes fire for */
	uint32_t cnt;      /* ATTACH: sites; DESTROY: ids */
	uint32_t flags;    /* ATTACH: UPROBE_MULTI_RETURN */
	uint32_t path_len; /* ATTACH: bytes of the path that follows, NUL included */
	uint8_t end, cookies;
	uint8_t nfds; /* sent with it: the program's, and the file's if path is "" */
	uint8_t pad;
};

/* ---- ptbpf's side ---- */

/* A link's id: the keeper's slot below SLOT_BITS, above it which keeper
 * (one that died is replaced; its links went with it). */
#define SLOT_BITS 20
#define SLOT_MASK ((1 << SLOT_BITS) - 1)
#define GEN_MASK ((1u << (31 - SLOT_BITS)) - 1)

static struct {
	pthread_mutex_t lock;
	pid_t pid;
	int sock;          /* -1: none (yet, or the last one died); -2: ptbpf exits */
	unsigned gen;      /* of the keeper now */
	double cpu_before; /* CPU seconds of the keepers that died */
} client = { PTHREAD_MUTEX_INITIALIZER, 0, -1, 0, 0 };

static int write_all(int fd, const void *p, size_t n)
{
	for (size_t o = 0; o < n;) {
		ssize_t w = send(fd, (const char *)p + o, n - o, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		o += w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	for (size_t o = 0; o < n;) {
		ssize_t r = read(fd, (char *)p + o, n - o);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		o += r;
	}
	return 0;
}

/* At exit: the keeper sees end of file, takes out what is left (nothing
 * after a normal detach) and exits, waited for, so that nothing of ptbpf
 * runs on after it. (After _exit or a kill it finishes on its own.) */
static void stop(void)
{
	if (client.sock >= 0)
		close(client.sock);
	client.sock = -2;
	if (client.pid > 0)
		waitpid(client.pid, NULL, 0);
}

static int start(void)
{
	char *argv[] = { KEEPER_ARGV0, NULL }, *envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int sv[2], peer, hello = -1, err;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	/* Above fd 3, so that dup2 to 3 makes a copy without close-on-exec */
	peer = fcntl(sv[1], F_DUPFD_CLOEXEC, KEEPER_FD + 1);
	close(sv[1]);
	if (peer < 0) {
		close(sv[0]);
		return -errno;
	}
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, peer, KEEPER_FD);
	posix_spawnattr_init(&at);
	/* Its own process group: a terminal's Ctrl-C or `timeout -s KILL`,
	 * sent to ptbpf's group, does not reach it. */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					      POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	err = posix_spawn(&client.pid, "/proc/self/exe", &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(peer);
	if (!err)
		err = -read_all(sv[0], &hello, sizeof(hello));
	if (err || hello) {
		log_msg("cannot start the link keeper (/proc/self/exe): %s\n",
			strerror(err ? err : EPROTO));
		close(sv[0]);
		if (client.pid > 0)
			waitpid(client.pid, NULL, 0);
		client.pid = 0;
		return -(err ? err : EPROTO);
	}
	client.sock = sv[0];
	client.gen = (client.gen + 1) & GEN_MASK;
	if (client.gen == 1)
		atexit(stop);
	return 0;
}

/* The keeper died (killed: it ignores the signals that stop ptbpf), and
 * its links with it: said, reaped, its CPU time kept; the next request
 * starts another. */
static void lost(void)
{
	log_msg("the link keeper (pid %d) is gone, and the probes it held with it; a new "
		"one makes the next\n", (int)client.pid);
	close(client.sock);
	client.sock = -1;
	client.cpu_before += target_cpu_seconds(client.pid);
	waitpid(client.pid, NULL, 0);
	client.pid = 0;
}

/* Sends req (with its nfds fds) and the n parts to the keeper, which
 * has taken them once the answer (its int) is read; -EPIPE if it died. */
static int send_req(const struct keeper_req *req, const int *fds, const struct iovec *parts,
		    int n)
{
	char ctl[CMSG_SPACE(2 * sizeof(int))] = { 0 };
	struct iovec iov = { (void *)req, sizeof(*req) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int32_t answer;
	int err = 0;

	if (req->nfds) {
		struct cmsghdr *c;

		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(req->nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(req->nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, req->nfds * sizeof(int));
	}
	if (sendmsg(client.sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(*req))
		err = -EPIPE;
	for (int i = 0; !err && i < n; i++)
		err = write_all(client.sock, parts[i].iov_base, parts[i].iov_len);
	if (!err)
		err = read_all(client.sock, &answer, sizeof(answer));
	if (err == -ECONNRESET)
		err = -EPIPE;
	return err ? err : answer;
}

/* An attach, made by a new keeper if the one asked died (whatever it
 * made went with it): the link's id, or -errno. */
static int ask_attach(const struct keeper_req *req, const int *fds, const struct iovec *parts,
		      int n)
{
	int ret = -EPIPE;

	pthread_mutex_lock(&client.lock);
	for (int tries = 0; ret == -EPIPE && tries < 2; tries++) {
		if (client.sock == -2) /* ptbpf is exiting */
			break;
		ret = client.sock < 0 ? start() : 0;
		if (!ret)
			ret = send_req(req, fds, parts, n);
		if (ret == -EPIPE && client.sock >= 0)
			lost();
		if (ret >= 0)
			ret |= (int)(client.gen << SLOT_BITS);
	}
	pthread_mutex_unlock(&client.lock);
	return ret;
}

int keeper_attach(int prog_fd, int pid, const char *path, const unsigned long *offsets,
		  const __u64 *cookies, size_t cnt, bool retprobe, bool end)
{
	struct keeper_req req = {
		.op = KEEPER_ATTACH, .pid = pid, .cnt = cnt, .path_len = strlen(path) + 1,
		.flags = retprobe ? UPROBE_MULTI_RETURN : 0, .end = end, .cookies = !!cookies,
		.nfds = 1,
	};
	int fds[2] = { prog_fd, -1 }, at;

	/* ptbpf's own fd of the file (target.c): the keeper gets a copy */
	if (sscanf(path, "/proc/self/fd/%d%n", &fds[1], &at) == 1 && !path[at]) {
		path = "";
		req.path_len = 1;
		req.nfds = 2;
	}
	if (cnt == 0 || cnt > MAX_SITES || req.path_len > PATH_MAX)
		return -EINVAL;
	{
		/* As they are: ptbpf and its keeper are one binary. */
		struct iovec parts[] = { { (void *)path, req.path_len },
					 { (void *)offsets, cnt * sizeof(*offsets) },
					 { (void *)cookies, cookies ? cnt * sizeof(*cookies) : 0 } };

		return ask_attach(&req, fds, parts, 3);
	}
}

int keeper_destroy(const int *ids, int n)
{
	struct keeper_req req = { .op = KEEPER_DESTROY };
	int *slots = malloc((n + 1) * sizeof(*slots)), ret = 0;
	struct iovec part = { slots, 0 };

	if (!slots)
		return -ENOMEM;
	pthread_mutex_lock(&client.lock);
	/* A dead keeper's links went with it. */
	for (int i = 0; i < n; i++)
		if (client.sock >= 0 && (unsigned)ids[i] >> SLOT_BITS == client.gen)
			slots[req.cnt++] = ids[i] & SLOT_MASK;
	part.iov_len = req.cnt * sizeof(*slots);
	if (req.cnt)
		ret = send_req(&req, NULL, &part, 1);
	if (ret == -EPIPE) {
		lost();
		ret = 0;
	}
	pthread_mutex_unlock(&client.lock);
	free(slots);
	return ret;
}

double keeper_cpu_seconds(void)
{
	return client.cpu_before + (client.pid > 0 ? target_cpu_seconds(client.pid) : 0);
}

/* ---- the keeper ---- */

static struct held {
	int fd; /* -1: taken out */
	bool end;
} *held;
static int nheld;

static void *close_one(void *fd)
{
	close((int)(intptr_t)fd);
	return NULL;
}

/* Closes fds[0..n), the last reference to each link: the kernel takes
 * its probes out before close returns. */
static void close_links(const int *fds, int n)
{
	while (n > 0) {
		pthread_t th[PARALLEL_MAX];
		bool started[PARALLEL_MAX];
		int k = n < PARALLEL_MAX ? n : PARALLEL_MAX;

		for (int i = 0; i < k; i++) {
			started[i] = k > 1 && !pthread_create(&th[i], NULL, close_one,
							      (void *)(intptr_t)fds[i]);
			if (!started[i])
				close(fds[i]);
		}
		for (int i = 0; i < k; i++)
			if (started[i])
				pthread_join(th[i], NULL);
		fds += k;
		n -= k;
	}
}

static int serve_attach(const struct keeper_req *req, int prog_fd, int file_fd)
{
	char path[PATH_MAX];
	size_t cnt = req->cnt;
	unsigned long *offs = malloc(cnt * sizeof(*offs));
	__u64 *cookies = req->cookies ? malloc(cnt * sizeof(*cookies)) : NULL;
	struct held *h;
	int fd, slot, err = -ENOMEM;

	if (!offs || (req->cookies && !cookies))
		goto out;
	if ((err = read_all(KEEPER_FD, path, req->path_len)) ||
	    (err = read_all(KEEPER_FD, offs, cnt * sizeof(*offs))) ||
	    (cookies && (err = read_all(KEEPER_FD, cookies, cnt * sizeof(*cookies)))))
		goto out;
	path[req->path_len - 1] = 0;
	if (file_fd >= 0)
		snprintf(path, sizeof(path), "/proc/self/fd/%d", file_fd);
	/* A slot taken out before is used again: a daemon's windows make
	 * links for months. */
	for (slot = 0; slot < nheld && held[slot].fd >= 0; slot++)
		;
	err = -ENOSPC;
	if (slot > SLOT_MASK)
		goto out;
	h = slot < nheld ? held : realloc(held, (nheld + 1) * sizeof(*held));
	err = -ENOMEM;
	if (!h)
		goto out;
	held = h;
	{
		LIBBPF_OPTS(bpf_link_create_opts, o, .uprobe_multi.path = path,
			    .uprobe_multi.offsets = offs, .uprobe_multi.cookies = cookies,
			    .uprobe_multi.cnt = cnt, .uprobe_multi.flags = req->flags,
			    .uprobe_multi.pid = req->pid);

		fd = bpf_link_create(prog_fd, 0, ATTACH_UPROBE_MULTI, &o);
	}
	err = fd < 0 ? fd : slot;
	if (fd >= 0)
		held[slot] = (struct held){ fd, req->end };
	if (fd >= 0 && slot == nheld)
		nheld++;
out:
	free(offs);
	free(cookies);
	return err;
}

static int serve_destroy(const struct keeper_req *req)
{
	int *ids = malloc(req->cnt * sizeof(*ids)), n = 0, err;

	if (!ids)
		return -ENOMEM;
	err = read_all(KEEPER_FD, ids, req->cnt * sizeof(*ids));
	for (uint32_t i = 0; !err && i < req->cnt; i++)
		if (ids[i] >= 0 && ids[i] < nheld && held[ids[i]].fd >= 0) {
			int fd = held[ids[i]].fd;

			held[ids[i]].fd = -1;
			ids[n++] = fd;
		}
	if (!err)
		close_links(ids, n);
	free(ids);
	return err;
}

/* One request; 1 at end of file (ptbpf is gone), <0 if the socket failed
 * (the answer to a request that failed is its -errno). */
static int serve_one(void)
{
	char ctl[CMSG_SPACE(2 * sizeof(int))];
	struct keeper_req req;
	struct iovec iov = { &req, sizeof(req) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	int fds[2] = { -1, -1 }, nfds = 0;
	int32_t answer;
	ssize_t r;

	do
		r = recvmsg(KEEPER_FD, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 1;
	if (r != sizeof(req))
		return -EPROTO;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len <= CMSG_LEN(sizeof(fds))) {
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
	}
	if (req.op == KEEPER_ATTACH && nfds == req.nfds && nfds >= 1 && req.cnt &&
	    req.cnt <= MAX_SITES && req.path_len && req.path_len <= PATH_MAX)
		answer = serve_attach(&req, fds[0], fds[1]);
	else if (req.op == KEEPER_DESTROY && req.cnt <= MAX_SITES && !nfds)
		answer = serve_destroy(&req);
	else
		answer = -EPROTO;
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (answer == -EPROTO) /* not ptbpf's request: the stream is lost */
		return answer;
	return write_all(KEEPER_FD, &answer, sizeof(answer));
}

int keeper_main(void)
{
	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1,
				       SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU };
	struct ucred peer;
	socklen_t len = sizeof(peer);
	int32_t hello = 0;
	int *fds, n = 0;

	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	prctl(PR_SET_NAME, KEEPER_COMM);
	if (getsockopt(KEEPER_FD, SOL_SOCKET, SO_PEERCRED, &peer, &len) ||
	    peer.pid != getppid()) {
		fprintf(stderr, "ptbpf: %s is a process of ptbpf's own; run ptbpf instead\n",
			KEEPER_ARGV0);
		return 2;
	}
	close_range(KEEPER_FD + 1, ~0U, 0);
	if (write_all(KEEPER_FD, &hello, sizeof(hello)))
		return 1;
	while (serve_one() == 0)
		;
	/* ptbpf is gone: what it left, the probes that begin slices first */
	fds = malloc((nheld + 1) * sizeof(*fds));
	for (int end = 0; end < 2; end++) {
		n = 0;
		for (int i = 0; i < nheld; i++)
			if (held[i].fd >= 0 && held[i].end == end) {
				if (fds)
					fds[n++] = held[i].fd;
				else
					close(held[i].fd);
			}
		close_links(fds, n);
	}
	return 0;
}

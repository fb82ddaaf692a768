/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon port's TLS and users (user/fleet/web_config.c), from a web
 * config as Prometheus exporters read it (exporter-toolkit's
 * --web.config.file):
 *
 *   tls_server_config:
 *     cert_file: server.crt      # relative paths: to the config file's folder
 *     key_file: server.key
 *   basic_auth_users:
 *     prometheus: $2y$10$...     # bcrypt hashes (htpasswd -B, Python's bcrypt)
 *
 * Either part may be left out; any other key is refused by name.
 */
#ifndef PTBPF_WEB_CONFIG_H
#define PTBPF_WEB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct web_config;
struct ssl_ctx_st;

/* Reads path: the config, or NULL with one line in err. */
struct web_config *web_config_load(const char *path, char *err, size_t errlen);
void web_config_free(struct web_config *wc);
/* The TLS server context, or NULL (plain HTTP). */
struct ssl_ctx_st *web_config_tls(const struct web_config *wc);
bool web_config_has_users(const struct web_config *wc);

enum web_auth {
	WEB_AUTH_OK,   /* a user's name and password */
	WEB_AUTH_NO,   /* none, or not a user's */
	WEB_AUTH_BUSY, /* unknown yet, and the port's bcrypt budget is spent: 429 */
};
/* Checks an Authorization header value ("Basic base64(user:password)",
 * "" for none) against the users' bcrypt hashes; the user's name into
 * user. bcrypt costs tens of ms of CPU a check: a check's outcome is
 * remembered for the same header (the last 32 users' and 32 refused, apart),
 * and at most 50 ms of CPU a second (200 at once) go to new checks. */
enum web_auth web_config_check(struct web_config *wc, const char *authorization, char *user,
			       size_t len);

#endif /* PTBPF_WEB_CONFIG_H */

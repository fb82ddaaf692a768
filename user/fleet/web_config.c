// SPDX-License-Identifier: BSD-2-Clause
/*
 * The daemon port's web config: TLS (OpenSSL) and basic-auth users with
 * bcrypt hashes (crypt_r(3), libxcrypt), read with libyaml. See
 * web_config.h. Everything here runs on the port's thread, except the
 * load.
 */
#define _GNU_SOURCE
#include "fleet/web_config.h"
#include "lib/clock.h"

#include <crypt.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <yaml.h>

#define MAX_USERS 64
#define MEMO 32
#define BCRYPT_MS_PER_S 50.0 /* new checks' CPU, refilled a second: 5% of a CPU */
#define BCRYPT_MS_BURST 200.0

struct web_config {
	SSL_CTX *tls;
	struct {
		char name[64], hash[128];
	} users[MAX_USERS];
	int nusers;
	/* Checks' outcomes by the header's digest: the users' (kept apart, so
	 * that a flood of wrong ones cannot push them out) and the refused. */
	struct memo {
		struct {
			unsigned char digest[SHA256_DIGEST_LENGTH];
			int user; /* -1: refused */
		} v[MEMO];
		int n, next;
	} ok, refused;
	double budget_ms;
	uint64_t budget_at;         /* when budget_ms was last topped up (ns) */
	struct crypt_data cd;
};

static struct web_config *fail(struct web_config *wc, char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	web_config_free(wc);
	return NULL;
}

/* A scalar's text, or NULL. */
static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* path, or path relative to the config's folder (as exporter-toolkit reads it). */
static void beside(const char *config, const char *path, char *out, size_t len)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", config);
	if (path[0] == '/')
		snprintf(out, len, "%s", path);
	else
		snprintf(out, len, "%s/%s", dirname(dir), path);
}

static int tls_load(struct web_config *wc, const char *config, const char *cert, const char *key,
		    char *err, size_t len)
{
	char c[PATH_MAX], k[PATH_MAX];
	const char *why = NULL;

	if (!cert || !key) {
		snprintf(err, len, "tls_server_config needs cert_file and key_file");
		return -1;
	}
	beside(config, cert, c, sizeof(c));
	beside(config, key, k, sizeof(k));
	if (access(c, R_OK) || access(k, R_OK)) {
		snprintf(err, len, "tls_server_config: %.200s: %s", access(c, R_OK) ? c : k,
			 strerror(errno));
		return -1;
	}
	wc->tls = SSL_CTX_new(TLS_server_method());
	if (!wc->tls || !SSL_CTX_set_min_proto_version(wc->tls, TLS1_2_VERSION))
		why = "OpenSSL cannot make a TLS server";
	else if (SSL_CTX_use_certificate_chain_file(wc->tls, c) != 1)
		why = "cert_file holds no PEM certificate (chain) that OpenSSL reads";
	else if (SSL_CTX_use_PrivateKey_file(wc->tls, k, SSL_FILETYPE_PEM) != 1)
		why = "key_file holds no PEM private key that OpenSSL reads";
	else if (SSL_CTX_check_private_key(wc->tls) != 1)
		why = "key_file's key is not cert_file's";
	if (why)
		snprintf(err, len, "tls_server_config: %s (%.200s, %.200s: %s)", why, c, k,
			 ERR_reason_error_string(ERR_peek_last_error()) ?: "no reason given");
	ERR_clear_error();
	return why ? -1 : 0;
}

static int read_tls(struct web_config *wc, yaml_document_t *d, yaml_node_t *m, const char *config,
		    char *err, size_t len)
{
	const char *cert = NULL, *key = NULL;

	if (m->type != YAML_MAPPING_NODE) {
		snprintf(err, len, "tls_server_config is not a mapping");
		return -1;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(d, p->key));
		const char *v = scalar(yaml_document_get_node(d, p->value));

		if (k && v && !strcmp(k, "cert_file")) {
			cert = v;
		} else if (k && v && !strcmp(k, "key_file")) {
			key = v;
		} else {
			snprintf(err, len, "tls_server_config: '%s' is not read by ptbpf (cert_file "
				 "and key_file are)", k ?: "?");
			return -1;
		}
	}
	return tls_load(wc, config, cert, key, err, len);
}

/* A bcrypt hash crypt(3) can check against. */
static bool bcrypt_hash(struct web_config *wc, const char *h)
{
	const char *out;

	if (strlen(h) != 60 || (strncmp(h, "$2a$", 4) && strncmp(h, "$2b$", 4) &&
				strncmp(h, "$2y$", 4)))
		return false;
	out = crypt_r("", h, &wc->cd);
	return out && out[0] == '$';
}

static int read_users(struct web_config *wc, yaml_document_t *d, yaml_node_t *m, char *err,
		      size_t len)
{
	if (m->type != YAML_MAPPING_NODE) {
		snprintf(err, len, "basic_auth_users is not a mapping of users to bcrypt hashes");
		return -1;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(d, p->key));
		const char *v = scalar(yaml_document_get_node(d, p->value));

		if (!k || !*k || strlen(k) >= sizeof(wc->users[0].name) || strchr(k, ':')) {
			snprintf(err, len, "basic_auth_users: a user name is empty, too long or has "
				 "a ':'");
			return -1;
		}
		if (!v || !bcrypt_hash(wc, v)) {
			snprintf(err, len, "basic_auth_users: %s's password is not a bcrypt hash "
				 "($2y$..., 60 characters; htpasswd -nB %s makes one)", k, k);
			return -1;
		}
		if (wc->nusers == MAX_USERS) {
			snprintf(err, len, "basic_auth_users: more than %d users", MAX_USERS);
			return -1;
		}
		snprintf(wc->users[wc->nusers].name, sizeof(wc->users[0].name), "%s", k);
		snprintf(wc->users[wc->nusers++].hash, sizeof(wc->users[0].hash), "%s", v);
	}
	return 0;
}

static int read_root(struct web_config *wc, yaml_document_t *d, const char *path, char *err,
		     size_t len)
{
	yaml_node_t *root = yaml_document_get_root_node(d);

	if (!root || root->type != YAML_MAPPING_NODE) {
		snprintf(err, len, "not a mapping (tls_server_config, basic_auth_users)");
		return -1;
	}
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(yaml_document_get_node(d, p->key));
		yaml_node_t *v = yaml_document_get_node(d, p->value);
		int rc;

		if (k && !strcmp(k, "tls_server_config"))
			rc = read_tls(wc, d, v, path, err, len);
		else if (k && !strcmp(k, "basic_auth_users"))
			rc = read_users(wc, d, v, err, len);
		else
			rc = -1, snprintf(err, len, "'%s' is not read by ptbpf (tls_server_config "
					  "and basic_auth_users are)", k ?: "?");
		if (rc)
			return rc;
	}
	return 0;
}

struct web_config *web_config_load(const char *path, char *err, size_t errlen)
{
	struct web_config *wc = calloc(1, sizeof(*wc));
	yaml_parser_t parser;
	yaml_document_t doc;
	char why[512] = "";
	FILE *f;
	int rc;

	if (!wc)
		return fail(wc, err, errlen, "--web-config: out of memory");
	f = fopen(path, "re");
	if (!f)
		return fail(wc, err, errlen, "--web-config %s: %s", path, strerror(errno));
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	rc = yaml_parser_load(&parser, &doc) ? 0 : -1;
	if (rc)
		snprintf(why, sizeof(why), "not YAML: %s at line %zu", parser.problem ?: "?",
			 parser.problem_mark.line + 1);
	else
		rc = read_root(wc, &doc, path, why, sizeof(why));
	if (!rc || parser.error == YAML_NO_ERROR)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(f);
	if (rc)
		return fail(wc, err, errlen, "--web-config %s: %s", path, why);
	wc->budget_ms = BCRYPT_MS_BURST;
	wc->budget_at = clock_mono_ns();
	return wc;
}

void web_config_free(struct web_config *wc)
{
	if (!wc)
		return;
	SSL_CTX_free(wc->tls);
	free(wc);
}

struct ssl_ctx_st *web_config_tls(const struct web_config *wc)
{
	return wc ? wc->tls : NULL;
}

bool web_config_has_users(const struct web_config *wc)
{
	return wc && wc->nusers;
}

/* "user:password" of a Basic credential, in out (len); false if it is none. */
static bool basic(const char *auth, char *out, size_t len)
{
	size_t n;
	int got;

	if (strncasecmp(auth, "Basic ", 6))
		return false;
	auth += 6;
	while (*auth == ' ')
		auth++;
	n = strlen(auth);
	if (!n || n % 4 || n / 4 * 3 >= len)
		return false;
	got = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)auth, (int)n);
	if (got < 0)
		return false;
	got -= (auth[n - 1] == '=') + (auth[n - 2] == '='); /* padding */
	out[got] = 0;
	return strlen(out) == (size_t)got && strchr(out, ':');
}

/* bcrypt of the password against user u's hash (a missing user: the
 * first user's hash, so that an unknown name costs what a known one does). */
static bool bcrypt_ok(struct web_config *wc, int u, const char *password)
{
	const char *hash = wc->users[u < 0 ? 0 : u].hash;
	const char *out = crypt_r(password, hash, &wc->cd);

	return u >= 0 && out && strlen(out) == strlen(hash) && !CRYPTO_memcmp(out, hash, strlen(hash));
}

/* The user a digest was found to be (-1: refused), or -2 if unknown. */
static int recall(const struct memo *m, const unsigned char *digest)
{
	for (int i = 0; i < m->n; i++)
		if (!memcmp(m->v[i].digest, digest, SHA256_DIGEST_LENGTH))
			return m->v[i].user;
	return -2;
}

static void remember(struct memo *m, const unsigned char *digest, int user)
{
	memcpy(m->v[m->next].digest, digest, SHA256_DIGEST_LENGTH);
	m->v[m->next].user = user;
	m->next = (m->next + 1) % MEMO;
	m->n += m->n < MEMO;
}

enum web_auth web_config_check(struct web_config *wc, const char *authorization, char *user,
			       size_t len)
{
	unsigned char digest[SHA256_DIGEST_LENGTH];
	char cred[1024], *colon;
	uint64_t t0;
	int u;
	bool ok;

	user[0] = 0;
	if (!basic(authorization, cred, sizeof(cred)))
		return WEB_AUTH_NO;
	SHA256((const unsigned char *)cred, strlen(cred), digest);
	if ((u = recall(&wc->ok, digest)) < -1)
		u = recall(&wc->refused, digest);
	if (u >= -1) {
		if (u >= 0)
			snprintf(user, len, "%s", wc->users[u].name);
		return u >= 0 ? WEB_AUTH_OK : WEB_AUTH_NO;
	}
	wc->budget_ms += clock_ms_since(wc->budget_at) / 1e3 * BCRYPT_MS_PER_S;
	if (wc->budget_ms > BCRYPT_MS_BURST)
		wc->budget_ms = BCRYPT_MS_BURST;
	wc->budget_at = clock_mono_ns();
	if (wc->budget_ms <= 0)
		return WEB_AUTH_BUSY;
	colon = strchr(cred, ':');
	*colon = 0;
	for (u = 0; u < wc->nusers && strcmp(wc->users[u].name, cred); u++)
		;
	t0 = clock_mono_ns();
	ok = bcrypt_ok(wc, u < wc->nusers ? u : -1, colon + 1);
	wc->budget_ms -= clock_ms_since(t0);
	OPENSSL_cleanse(cred, sizeof(cred));
	if (ok)
		remember(&wc->ok, digest, u);
	else
		remember(&wc->refused, digest, -1);
	if (ok)
		snprintf(user, len, "%s", wc->users[u].name);
	return ok ? WEB_AUTH_OK : WEB_AUTH_NO;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the daemon port's users (user/fleet/web_config.c): a web
 * config read, its bcrypt users checked (the right password, a wrong one,
 * an unknown user, not Basic at all), a check's outcome remembered, and
 * new checks refused once their CPU budget is spent; configs it refuses,
 * each with its one line.
 */
#define _GNU_SOURCE
#include "fleet/web_config.h"

#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "check.h"

static char dir[] = "/tmp/ptbpf-test-web-XXXXXX";

static struct web_config *load(const char *yml, char *err)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/web.yml", dir);
	f = fopen(path, "w");
	fputs(yml, f);
	fclose(f);
	return web_config_load(path, err, 512);
}

static const char *basic(const char *cred)
{
	static char out[256];

	strcpy(out, "Basic ");
	EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)cred, (int)strlen(cred));
	return out;
}

static double ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void)
{
	struct crypt_data cd = { 0 };
	char yml[512], err[512], user[64], wrong[64];
	struct web_config *wc;
	const char *hash;
	int busy = 0, i;
	double t0;

	if (!mkdtemp(dir))
		return 2;
	hash = crypt_r("s3cret", crypt_gensalt_rn("$2y$", 6, NULL, 0, cd.setting,
						  sizeof(cd.setting)), &cd);
	snprintf(yml, sizeof(yml), "basic_auth_users:\n  prom: '%s'\n", hash);
	wc = load(yml, err);
	CHECK(wc && web_config_has_users(wc) && !web_config_tls(wc), err, 0);
	CHECK(web_config_check(wc, basic("prom:s3cret"), user, sizeof(user)) == WEB_AUTH_OK &&
	      !strcmp(user, "prom"), "the right password", 0);
	t0 = ms();
	CHECK(web_config_check(wc, basic("prom:s3cret"), user, sizeof(user)) == WEB_AUTH_OK,
	      "again", 0);
	CHECK(ms() - t0 < 1, "again: remembered, no bcrypt", (uint64_t)(ms() - t0));
	CHECK(web_config_check(wc, basic("prom:wrong"), user, sizeof(user)) == WEB_AUTH_NO &&
	      !user[0], "a wrong password", 0);
	CHECK(web_config_check(wc, basic("eve:s3cret"), user, sizeof(user)) == WEB_AUTH_NO,
	      "an unknown user", 0);
	CHECK(web_config_check(wc, "Bearer abc", user, sizeof(user)) == WEB_AUTH_NO, "not Basic", 0);
	CHECK(web_config_check(wc, "", user, sizeof(user)) == WEB_AUTH_NO, "none", 0);
	CHECK(web_config_check(wc, "Basic !!!!", user, sizeof(user)) == WEB_AUTH_NO, "not base64", 0);
	/* New wrong passwords, one after another: past the budget, refused
	 * unchecked; a remembered outcome is still answered. */
	for (i = 0; i < 2000 && !busy; i++) {
		snprintf(wrong, sizeof(wrong), "prom:w%d", i);
		busy = web_config_check(wc, basic(wrong), user, sizeof(user)) == WEB_AUTH_BUSY;
	}
	CHECK(busy, "the bcrypt budget runs out", i);
	CHECK(web_config_check(wc, basic("prom:s3cret"), user, sizeof(user)) == WEB_AUTH_OK,
	      "remembered while busy", 0);
	web_config_free(wc);
	static const struct {
		const char *yml, *said;
	} bad[] = {
		{ "foo: 1\n", "'foo' is not read by ptbpf" },
		{ "basic_auth_users:\n  bob: plain\n", "bob's password is not a bcrypt hash" },
		{ "basic_auth_users: [a]\n", "not a mapping of users" },
		{ "tls_server_config: {cert_file: a.crt}\n", "needs cert_file and key_file" },
		{ "tls_server_config: {cert_file: a.crt, key_file: a.key}\n", "No such file" },
		{ "tls_server_config: {min_version: TLS13}\n", "'min_version' is not read" },
		{ ": :\n", "not YAML" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		wc = load(bad[k].yml, err);
		CHECK(!wc && strstr(err, bad[k].said) && !strchr(err, '\n'), err, k);
		web_config_free(wc);
	}
	snprintf(yml, sizeof(yml), "%s/web.yml", dir);
	unlink(yml);
	rmdir(dir);
	return check_summary("test_web_config");
}

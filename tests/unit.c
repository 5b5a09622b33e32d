/*
 * unit.c - C unit tests for the pure parts: durations, names, signals,
 * URLs, exit-status mapping and the timing rules.
 * Prints "N passed, N failed" and exits non-zero on any failure.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "supervise.h"
#include "url.h"
#include "util.h"

static int passed, failed;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (cond) {                                                \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__,   \
				__LINE__, #cond);                          \
		}                                                          \
	} while (0)

static int64_t dur(const char *s)
{
	int64_t ms = -42;

	return lr_duration_parse(s, &ms) == 0 ? ms : -1;
}

static void test_durations(void)
{
	char buf[32];

	CHECK(dur("10") == 10000);
	CHECK(dur("10s") == 10000);
	CHECK(dur("1500ms") == 1500);
	CHECK(dur("2.5") == 2500);
	CHECK(dur("0.001") == 1);
	CHECK(dur("5m") == 300000);
	CHECK(dur("1h") == 3600000);
	CHECK(dur("0") == 0);
	CHECK(dur("") == -1);
	CHECK(dur("-1") == -1);
	CHECK(dur("1x") == -1);
	CHECK(dur("s") == -1);
	CHECK(dur("1 s") == -1);
	CHECK(dur("99999999999999999999") == -1);
	CHECK(dur("1000000000h") == -1);
	lr_duration_format(1500, buf, sizeof(buf));
	CHECK(strcmp(buf, "1500ms") == 0);
	lr_duration_format(300000, buf, sizeof(buf));
	CHECK(strcmp(buf, "5m") == 0);
}

static void test_names(void)
{
	char longname[LR_NAME_MAX + 2];

	CHECK(lr_name_check("nightly-invoices") == NULL);
	CHECK(lr_name_check("a.b_c:d@e-1") == NULL);
	CHECK(lr_name_check("") != NULL);
	CHECK(lr_name_check("../x") != NULL);
	CHECK(lr_name_check("a/b") != NULL);
	CHECK(lr_name_check("/") != NULL);
	CHECK(lr_name_check(".hidden") != NULL);
	CHECK(lr_name_check("-n") != NULL);
	CHECK(lr_name_check("sp ace") != NULL);
	CHECK(lr_name_check("caf\xc3\xa9") != NULL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[LR_NAME_MAX] = '\0';
	CHECK(lr_name_check(longname) == NULL);
	longname[LR_NAME_MAX] = 'a';
	longname[LR_NAME_MAX + 1] = '\0';
	CHECK(lr_name_check(longname) != NULL);
}

static void test_signals(void)
{
	CHECK(lr_signal_parse("TERM") == SIGTERM);
	CHECK(lr_signal_parse("SIGINT") == SIGINT);
	CHECK(lr_signal_parse("sigusr1") == SIGUSR1);
	CHECK(lr_signal_parse("9") == SIGKILL);
	CHECK(lr_signal_parse("0") == -1);
	CHECK(lr_signal_parse("99") == -1);
	CHECK(lr_signal_parse("NOPE") == -1);
	CHECK(lr_int_parse("255", 255) == 255);
	CHECK(lr_int_parse("256", 255) == -1);
	CHECK(lr_int_parse("-1", 255) == -1);
	CHECK(lr_int_parse("1a", 255) == -1);
}

static void test_urls(void)
{
	struct lr_url *u;
	char why[256];

	CHECK(lr_url_parse("redis://user:s%40cret@h1:6379/2?prefix=x&timeout=2s",
			   &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->scheme, "redis") == 0);
	CHECK(strcmp(u->user, "user") == 0);
	CHECK(strcmp(u->password, "s@cret") == 0);
	CHECK(strcmp(u->hosts, "h1:6379") == 0);
	CHECK(strcmp(u->path, "/2") == 0);
	CHECK(strcmp(lr_url_param(u, "prefix"), "x") == 0);
	CHECK(strcmp(lr_url_param(u, "timeout"), "2s") == 0);
	CHECK(lr_url_param(u, "nope") == NULL);
	CHECK(strcmp(u->redacted, "redis://user@h1:6379/2?prefix=x&timeout=2s") == 0);
	CHECK(strstr(u->redacted, "cret") == NULL);
	lr_url_free(u);

	CHECK(lr_url_parse("REDIS://:pw@h", &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->scheme, "redis") == 0);
	CHECK(strcmp(u->redacted, "REDIS://h") == 0);
	lr_url_free(u);

	CHECK(lr_url_parse("file:///var/lock/x", &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->hosts, "") == 0);
	CHECK(strcmp(u->path, "/var/lock/x") == 0);
	lr_url_free(u);

	CHECK(lr_url_parse("etcd://[::1]:2379,10.0.0.2:2379", &u, why,
			   sizeof(why)) == 0);
	CHECK(strcmp(u->hosts, "[::1]:2379,10.0.0.2:2379") == 0);
	lr_url_free(u);

	CHECK(lr_url_parse("nourl", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
	CHECK(lr_url_parse("://x", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
	CHECK(lr_url_parse("1x://x", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
	CHECK(lr_url_parse("redis://h/%zz", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
	CHECK(lr_url_parse("redis://u:p%4@h", &u, why, sizeof(why)) < 0);
	CHECK(strstr(why, "p%4") == NULL);
	lr_url_free(u);
	CHECK(lr_url_parse("redis://h#frag", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
	CHECK(lr_url_parse("redis://h h", &u, why, sizeof(why)) < 0);
	lr_url_free(u);
}

static void test_exit_codes(void)
{
	int sig;

	CHECK(lr_exit_code(LR_OUT_CHILD, 0, 1, &sig) == 0 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_CHILD, 3 << 8, 1, &sig) == 3 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_CHILD, SIGTERM, 1, &sig) == 128 + SIGTERM &&
	      sig == SIGTERM);
	CHECK(lr_exit_code(LR_OUT_CHILD, SIGKILL, 1, &sig) == 137 &&
	      sig == SIGKILL);
	CHECK(lr_exit_code(LR_OUT_CONFLICT, 0, 1, &sig) == 1 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_CONFLICT, 0, 75, &sig) == 75);
	CHECK(lr_exit_code(LR_OUT_LOST, 0, 1, &sig) == 124 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_FAILED, 0, 1, &sig) == 125 && sig == 0);
}

static void test_timing(void)
{
	/* D = t_send + TTL*(1-0.01) - 2ms */
	CHECK(lr_deadline(1000, 10000) == 1000 + 9900 - 2);
	CHECK(lr_deadline(0, 1000) == 988);
	CHECK(lr_timing_check(10000, 3333, 2000) == NULL);
	CHECK(lr_timing_check(1000, 333, 200) == NULL);
	CHECK(lr_timing_check(400, 100, 150) != NULL);   /* TTL too short */
	CHECK(lr_timing_check(10000, 10000, 2000) != NULL); /* R >= TTL */
	CHECK(lr_timing_check(10000, 3333, 100) != NULL);  /* grace <= kappa */
	CHECK(lr_timing_check(10000, 3333, 6700) != NULL); /* grace >= TTL-R */
	CHECK(lr_timing_check(10000, 3333, 6400) == NULL);
}

int main(void)
{
	test_durations();
	test_names();
	test_signals();
	test_urls();
	test_exit_codes();
	test_timing();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

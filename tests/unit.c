/*
 * unit.c - C unit tests for the pure parts: durations, names, signals,
 * URLs, exit-status mapping and the timing rules.
 * Prints "N passed, N failed" and exits non-zero on any failure.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "mysql/sha.h"
#include "supervise.h"
#include "store/url.h"
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

/* lr_url_mask() on a copy of in: the result, and how many it masked. */
static int masked(const char *in, const char *want, size_t n)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", in);
	return lr_url_mask(buf) == n && strcmp(buf, want) == 0;
}

static void test_url_mask(void)
{
	CHECK(masked("redis://:pw@h:1/2", "redis://:**@h:1/2", 2));
	CHECK(masked("redis://u:p@ss:w@h", "redis://u:******@h", 6));
	CHECK(masked("redis+sentinel://s/m?sentinel_password=Sx",
		     "redis+sentinel://s/m?sentinel_password=**", 2));
	CHECK(masked("etcd://root:S3cret@a:1,b:2", "etcd://root:******@a:1,b:2",
		     6));
	CHECK(masked("zk://u:p%40w@h/chroot?root=/x",
		     "zk://u:*****@h/chroot?root=/x", 5));
	CHECK(masked("postgres://u@h/db?sslmode=require&password=x%20y"
		     "&pass%77ord=z",
		     "postgres://u@h/db?sslmode=require&password=*****"
		     "&pass%77ord=*",
		     6));
	CHECK(masked("postgres://h/db?token=abc#frag",
		     "postgres://h/db?token=***#frag", 3));
	CHECK(masked("redis://u@h/?prefix=a:b", "redis://u@h/?prefix=a:b", 0));
	CHECK(masked("redis://h:6379", "redis://h:6379", 0));
	CHECK(masked("file://", "file://", 0));
	CHECK(masked("not a url:pw@x", "not a url:pw@x", 0));
	CHECK(masked("redis://:@h", "redis://:@h", 0));
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

	CHECK(lr_url_parse("postgresql://lr@h/db?sslmode=disable&password=s3&"
			   "application_name=x&sslpassword=k",
			   &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->redacted, "postgresql://lr@h/db?sslmode=disable&"
				  "application_name=x") == 0);
	CHECK(strcmp(lr_url_param(u, "password"), "s3") == 0);
	lr_url_free(u);

	CHECK(lr_url_parse("postgres://u@h/db?pass%77ord=s3&x=1", &u, why,
			   sizeof(why)) == 0);
	CHECK(strcmp(u->redacted, "postgres://u@h/db?x=1") == 0);
	lr_url_free(u);

	CHECK(lr_url_parse("redis://:ab/cd@h:6379", &u, why, sizeof(why)) < 0);
	CHECK(strstr(why, "percent-encode") != NULL);
	CHECK(strstr(why, "ab") == NULL && strstr(why, "cd") == NULL);
	lr_url_free(u);

	CHECK(lr_url_parse("redis://h?password=x", &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->redacted, "redis://h") == 0);
	lr_url_free(u);

	/* The sentinels' password is as secret as the data nodes'. */
	CHECK(lr_url_parse("rediss+sentinel://:pw@s1:26379,s2/m?"
			   "sentinel_password=Sx&db=2",
			   &u, why, sizeof(why)) == 0);
	CHECK(strcmp(u->redacted, "rediss+sentinel://s1:26379,s2/m?db=2") ==
	      0);
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

/* Parses url and splits its hosts; returns the count or -1 (why set). */
static int hosts(const char *url, const char *def, size_t max,
		 struct lr_url_host **h, char *why, size_t len)
{
	struct lr_url *u;
	size_t n = 0;
	int rc;

	*h = NULL;
	if (lr_url_parse(url, &u, why, len) < 0) {
		lr_url_free(u);
		return -1;
	}
	rc = lr_url_hosts(u, "x", def, 2379, max, h, &n, why, len);
	lr_url_free(u);
	if (rc < 0) {
		lr_url_hosts_free(*h, n);
		*h = NULL;
		return -1;
	}
	return (int)n;
}

static void test_url_hosts(void)
{
	struct lr_url_host *h;
	char why[256], buf[64];

	CHECK(hosts("x://[::1]:2380,10.0.0.2,h:1", NULL, 8, &h, why,
		    sizeof(why)) == 3);
	CHECK(h && strcmp(h[0].host, "::1") == 0 && h[0].port == 2380);
	CHECK(h && strcmp(h[1].host, "10.0.0.2") == 0 && h[1].port == 2379);
	CHECK(h && strcmp(h[2].host, "h") == 0 && h[2].port == 1);
	if (h) {
		lr_url_host_format(&h[0], buf, sizeof(buf));
		CHECK(strcmp(buf, "[::1]:2380") == 0);
		lr_url_host_format(&h[2], buf, sizeof(buf));
		CHECK(strcmp(buf, "h:1") == 0);
	}
	lr_url_hosts_free(h, 3);
	CHECK(hosts("x:///path", "127.0.0.1", 1, &h, why, sizeof(why)) == 1);
	CHECK(h && strcmp(h[0].host, "127.0.0.1") == 0 && h[0].port == 2379);
	lr_url_hosts_free(h, 1);
	CHECK(hosts("x:///path", NULL, 1, &h, why, sizeof(why)) < 0);
	CHECK(strcmp(why, "x URL: no host") == 0);
	CHECK(hosts("x://h:99999", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(strstr(why, "bad port in 'h:99999'") != NULL);
	CHECK(hosts("x://h:0", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://h:", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://h:+1", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://h:065535", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://:80", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://a,,b", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(strstr(why, "empty host") != NULL);
	CHECK(hosts("x://a,", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://::1", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(strstr(why, "brackets") != NULL);
	CHECK(hosts("x://[::1", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://[]:1", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://[::1]x", NULL, 8, &h, why, sizeof(why)) < 0);
	CHECK(hosts("x://a,b", NULL, 1, &h, why, sizeof(why)) < 0);
	CHECK(strcmp(why, "x URL: give one host") == 0);
	CHECK(hosts("x://a,b,c", NULL, 2, &h, why, sizeof(why)) < 0);
	CHECK(strcmp(why, "x URL: at most 2 hosts") == 0);
}

static const char *const evict_choices[] = { "warn", "refuse", "ignore",
					     NULL };
static const struct lr_url_opt test_opts[] = {
	{ "timeout", LR_OPT_DURATION, 1, 3600000, NULL },
	{ "evict", LR_OPT_ENUM, 0, 0, evict_choices },
	{ "db", LR_OPT_UINT, 0, 100000, NULL },
	{ "cacert", LR_OPT_PATH, 0, 0, NULL },
	{ "prefix", LR_OPT_STRING, 0, 0, NULL },
};

/* Checks url's options against test_opts; 0 or -1 (why set). */
static int opts(const char *url, union lr_url_val *v, unsigned *given,
		char *why, size_t len)
{
	static char str[2][64];
	struct lr_url *u;
	int rc, i;

	v[0].n = 2000;
	v[1].n = 0;
	v[2].n = 0;
	v[3].s = NULL;
	v[4].s = "leaserun:";
	if (lr_url_parse(url, &u, why, len) < 0) {
		lr_url_free(u);
		return -1;
	}
	rc = lr_url_opts(u, "redis", test_opts, 5, v, given, why, len);
	/* String values point into u: keep copies. */
	for (i = 0; i < 2; i++) {
		if (v[3 + i].s) {
			snprintf(str[i], sizeof(str[i]), "%s", v[3 + i].s);
			v[3 + i].s = str[i];
		}
	}
	lr_url_free(u);
	return rc;
}

static void test_url_opts(void)
{
	union lr_url_val v[5];
	unsigned given;
	char why[256];

	CHECK(opts("redis://h", v, &given, why, sizeof(why)) == 0);
	CHECK(given == 0 && v[0].n == 2000 && strcmp(v[4].s, "leaserun:") == 0);
	CHECK(opts("redis://h?timeout=1h&evict=ignore&db=7&prefix=", v, &given,
		   why, sizeof(why)) == 0);
	CHECK(given == (1 | 2 | 4 | 16));
	CHECK(v[0].n == 3600000 && v[1].n == 2 && v[2].n == 7);
	CHECK(strcmp(v[4].s, "") == 0);
	CHECK(opts("redis://h?timeout=1m", v, &given, why, sizeof(why)) == 0);
	CHECK(v[0].n == 60000);
	CHECK(opts("redis://h?timeout=250ms", v, &given, why, sizeof(why)) ==
	      0);
	CHECK(v[0].n == 250);
	/* The one grammar: what --ttl refuses, an option refuses too. */
	CHECK(opts("redis://h?timeout=nan", v, &given, why, sizeof(why)) < 0);
	CHECK(strstr(why, "redis URL: bad timeout=nan") == why);
	CHECK(opts("redis://h?timeout=inf", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?timeout=1e3", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?timeout=-1s", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?timeout=0", v, &given, why, sizeof(why)) < 0);
	CHECK(strstr(why, "out of range (1ms to 1h)") != NULL);
	CHECK(opts("redis://h?timeout=2h", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?timeout=", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?evict=maybe", v, &given, why, sizeof(why)) < 0);
	CHECK(strcmp(why, "redis URL: bad evict=maybe (warn, refuse or "
			  "ignore)") == 0);
	CHECK(opts("redis://h?db=100001", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?db=-1", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?db=", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?cacert=", v, &given, why, sizeof(why)) < 0);
	CHECK(opts("redis://h?cacert=/a/b", v, &given, why, sizeof(why)) == 0);
	CHECK(given == 8 && strcmp(v[3].s, "/a/b") == 0);
	CHECK(opts("redis://h?nope=1", v, &given, why, sizeof(why)) < 0);
	CHECK(strcmp(why, "unknown redis URL option 'nope' (known: timeout, "
			  "evict, db, cacert, prefix)") == 0);
}

/* A number or a word: replicas=auto, replicas=2. */
static void test_url_opt_number_or_word(void)
{
	static const char *const words[] = { "auto", NULL };
	static const struct lr_url_opt o[] = {
		{ "replicas", LR_OPT_UINT, 0, 64, words },
	};
	/* 20 and 19 nines pass INT64_MAX: refused, without a signed
	 * overflow on the way (UBSan). */
	const char *urls[] = { "redis://h?replicas=auto", "redis://h?replicas=3",
			       "redis://h?replicas=65", "redis://h?replicas=al",
			       "redis://h?replicas=99999999999999999999",
			       "redis://h?replicas=9999999999999999999" };
	int64_t want[] = { -1, 3 };
	union lr_url_val v;
	unsigned given;
	char why[256];
	size_t i;

	for (i = 0; i < 6; i++) {
		struct lr_url *u;
		int rc;

		CHECK(lr_url_parse(urls[i], &u, why, sizeof(why)) == 0);
		v.n = 99;
		rc = lr_url_opts(u, "redis", o, 1, &v, &given, why,
				 sizeof(why));
		if (i < 2)
			CHECK(rc == 0 && given == 1 && v.n == want[i]);
		else
			CHECK(rc < 0 && strstr(why, "(a whole number from 0 to "
						    "64, or auto)") != NULL);
		lr_url_free(u);
	}
}

/* Every occurrence of every secret, as written and as decoded. */
static void test_scrub(void)
{
	char s[] = "uri \"x://u:Pw%41d@h\": PwAd, PwAdPwAd; pw";
	char t[] = "a Later one";
	int i;

	lr_secret_add("PwAd");
	lr_secret_add_n("Pw%41d@h", 5);
	lr_secret_add("");
	lr_secret_add(NULL);
	lr_scrub(s);
	CHECK(strcmp(s, "uri \"x://u:*****d@h\": ****, ********; pw") == 0);
	lr_scrub(NULL);
	/* A secret met again (the same password in the URL, a parameter
	 * and the environment) takes no room: one more is still kept. */
	for (i = 0; i < 2 * LR_SECRETS; i++)
		lr_secret_add("PwAd");
	lr_secret_add("Later");
	lr_scrub(t);
	CHECK(strcmp(t, "a ***** one") == 0);
}

static void test_json(void)
{
	struct lr_json j;
	char buf[128], small[40];

	lr_json_open(&j, buf, sizeof(buf));
	lr_json_str(&j, "a", "q\"b\\s\n");
	lr_json_int(&j, "n", -3);
	lr_json_uint(&j, "u", 18446744073709551615ULL);
	lr_json_bool(&j, "t", 1);
	lr_json_str(&j, "z", NULL);
	lr_json_close(&j);
	CHECK(strcmp(buf, "{\"a\":\"q\\\"b\\\\s\\u000a\",\"n\":-3,"
			  "\"u\":18446744073709551615,\"t\":true,"
			  "\"z\":null}") == 0);
	CHECK(!j.cut);
	/* What does not fit is left out whole: the object still closes. */
	lr_json_open(&j, small, sizeof(small));
	lr_json_str(&j, "name", "job");
	lr_json_str(&j, "host", "a-host-name-far-too-long-to-fit");
	lr_json_int(&j, "pid", 42);
	CHECK(lr_json_close(&j) == strlen(small));
	CHECK(strcmp(small, "{\"name\":\"job\",\"pid\":42}") == 0);
	CHECK(j.cut);
	lr_json_open(&j, small, 3);
	lr_json_int(&j, "x", 1);
	lr_json_close(&j);
	CHECK(strcmp(small, "{}") == 0);
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
	CHECK(lr_exit_code(LR_OUT_TIMEOUT, 0, 1, &sig) == 124 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_HELD_BACK, 0, 1, &sig) == 1 && sig == 0);
	CHECK(lr_exit_code(LR_OUT_HELD_BACK, 0, 75, &sig) == 75);
}

static int human(int64_t ms, const char *want)
{
	char buf[32];

	lr_duration_human(ms, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		fprintf(stderr, "# %lld ms: \"%s\", want \"%s\"\n",
			(long long)ms, buf, want);
	return strcmp(buf, want) == 0;
}

static void test_human(void)
{
	CHECK(human(0, "0ms"));
	CHECK(human(850, "850ms"));
	CHECK(human(1000, "1s"));
	CHECK(human(3000, "3s"));
	CHECK(human(4250, "4.2s"));
	CHECK(human(9050, "9s"));
	CHECK(human(45999, "45s"));
	CHECK(human(60000, "1m"));
	CHECK(human(195000, "3m15s"));
	CHECK(human(3600000, "1h"));
	CHECK(human(7500000, "2h5m"));
	CHECK(human(-5, "0ms"));
}

static void test_p99(void)
{
	struct lr_p99 p;
	int i;

	memset(&p, 0, sizeof(p));
	CHECK(lr_p99(&p) == 0);
	lr_p99_add(&p, 500); /* one slow renewal is not a p99 */
	CHECK(lr_p99(&p) == 0);
	for (i = 0; i < 50; i++)
		lr_p99_add(&p, 3);
	CHECK(lr_p99(&p) == 3);
	lr_p99_add(&p, 400); /* two are: 2 in 100 is more than 1% */
	CHECK(lr_p99(&p) == 400);
	/* 100 more fast ones push both out of the window. */
	for (i = 0; i < LR_P99_N; i++)
		lr_p99_add(&p, 2);
	CHECK(p.n == LR_P99_N && lr_p99(&p) == 2);
	lr_p99_add(&p, -5);
	CHECK(lr_p99(&p) == 2);
	/* A full window: one slow one among 100 is still not the p99 (and
	 * nothing past the window counts). */
	lr_p99_add(&p, 50);
	CHECK(lr_p99(&p) == 2);
	CHECK(lr_safe_ttl(55) == 600);
	CHECK(lr_safe_ttl(100) == 1000);
	CHECK(lr_safe_ttl(180) == 2000);
	CHECK(lr_safe_ttl(1234) == 13000);
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
	/* ... said as such, not as the margin that R = TTL also breaks. */
	CHECK(strcmp(lr_timing_check(10000, 10000, 2000),
		     "the renew interval must be shorter than the TTL") == 0);
	CHECK(lr_timing_check(10000, 3333, 100) != NULL);  /* grace <= kappa */
	CHECK(lr_timing_check(10000, 3333, 6700) != NULL); /* grace >= TTL-R */
	CHECK(lr_timing_check(10000, 3333, 5500) == NULL);
	CHECK(lr_timing_check(10000, 3333, 6400) != NULL); /* no margin */
	CHECK(lr_timing_check(500, 166, 150) == NULL);   /* smallest TTL */
	/* The bound to the millisecond: grace + 100 + 1.25R <= TTL*0.99 - 2
	 * (TTL 10s: 9898ms; R 400ms: 600ms with kappa). */
	CHECK(lr_timing_check(10000, 400, 9298) == NULL);
	CHECK(lr_timing_check(10000, 400, 9299) != NULL);
}

/*
 * The state machine, driven through lr_supervise() by a scripted store
 * (in-process: this tests the loop, not a store) and a real child.
 */
struct script {
	enum lr_status acquire[8]; /* one per attempt; the last repeats */
	enum lr_status renew[8];
	int na, nr;                /* script lengths; 0 means 1 */
	int first_acquire_ms;      /* the first acquire takes this long */
	int64_t granted_ttl;       /* grant.ttl_ms */
	enum lr_status release;    /* what every release says */
	enum lr_status run_start;  /* what every run_start says */
	uint64_t fences[4];        /* the first nf grants' fences; then */
	int nf;                    /* 7, 8, 9... by attempt */
	enum lr_status check[8];   /* check() before each spawn */
	int nc, ichk, nchk;        /* its length, position, calls */
	int iacq, iren;          /* positions in the scripts */
	int nacq, nren, releases; /* calls */
	int nstart, nend, end_status; /* run_start, run_end calls; status */
	uint64_t start_fence, end_fence; /* the fences they were given */
	int64_t t_acq;           /* when the first acquire came */
};
static struct script *sc;

static enum lr_status next(const enum lr_status *v, int n, int *i)
{
	enum lr_status rc = v[*i];

	if (*i + 1 < n)
		(*i)++;
	return rc;
}

static enum lr_status s_acquire(struct lr_store *st, int64_t d,
				struct lr_grant *g, struct lr_err *err)
{
	g->fence = sc->nacq < sc->nf ? sc->fences[sc->nacq]
				     : 7 + (uint64_t)sc->nacq;
	g->ttl_ms = sc->granted_ttl;
	if (sc->nacq == 0)
		sc->t_acq = lr_now_ms();
	if (sc->nacq == 0 && sc->first_acquire_ms)
		usleep((useconds_t)sc->first_acquire_ms * 1000);
	sc->nacq++;
	return next(sc->acquire, sc->na, &sc->iacq);
}

static enum lr_status s_renew(struct lr_store *st, int64_t d,
			      struct lr_err *err)
{
	sc->nren++;
	return next(sc->renew, sc->nr, &sc->iren);
}

static enum lr_status s_release(struct lr_store *st, int64_t d,
				struct lr_err *err)
{
	sc->releases++;
	return sc->release;
}

static enum lr_status s_run_start(struct lr_store *st, int64_t period,
				  uint64_t fence, int64_t d,
				  struct lr_run *last, struct lr_err *err)
{
	sc->nstart++;
	sc->start_fence = fence;
	if (sc->run_start == LR_BUSY) {
		last->known = 1;
		last->ago_ms = 1000;
		last->next_ms = period - 1000;
		snprintf(last->host, sizeof(last->host), "web1");
	}
	return sc->run_start;
}

static enum lr_status s_run_end(struct lr_store *st, uint64_t fence,
				int status, int64_t d, struct lr_err *err)
{
	sc->nend++;
	sc->end_fence = fence;
	sc->end_status = status;
	return LR_OK;
}

static enum lr_status s_check(struct lr_store *st, int64_t d,
			      struct lr_err *err)
{
	sc->nchk++;
	return next(sc->check, sc->nc, &sc->ichk);
}

static const struct lr_store_ops scripted = {
	.abi = LR_STORE_ABI,
	.name = "scripted",
	.acquire = s_acquire,
	.check = s_check,
	.renew = s_renew,
	.release = s_release,
	.run_start = s_run_start,
	.run_end = s_run_end,
};

/* Knobs of the next run_script() (0: off). */
static int64_t once_per, max_time, splay;

static const char *child_cmd;

static pid_t s_spawn(void *ctx, const struct lr_grant *g, int *code)
{
	pid_t pid = fork();

	if (pid == 0) {
		sigset_t none;

		setpgid(0, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl("/bin/sh", "sh", "-c", child_cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

static void run_script(struct script *s, const char *cmd, int64_t wait_ms,
		       struct lr_sup_result *res)
{
	struct lr_sup_cfg cfg;
	sigset_t set;

	sc = s;
	child_cmd = cmd;
	fprintf(stderr, "# scripted store, command '%s'\n", cmd);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.ops = &scripted;
	cfg.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	cfg.ttl_ms = 600;
	cfg.renew_ms = 150;
	cfg.grace_ms = 200;
	cfg.wait_ms = wait_ms;
	cfg.stop_signal = SIGTERM;
	cfg.spawn = s_spawn;
	cfg.once_per_ms = once_per;
	cfg.max_time_ms = max_time;
	cfg.splay_ms = splay;
	lr_supervise(&cfg, res);
	close(cfg.sigfd);
	once_per = max_time = splay = 0;
}

static void test_state_machine(void)
{
	struct lr_sup_result res;
	struct script s;

	/* Held throughout: the child's status, released once. */
	memset(&s, 0, sizeof(s));
	run_script(&s, "sleep 0.4; exit 3", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD);
	CHECK(WIFEXITED(res.wstatus) && WEXITSTATUS(res.wstatus) == 3);
	CHECK(res.fence == 7);
	CHECK(s.nren >= 1 && s.releases == 1);

	/* Busy with -n: a conflict, no child, no release. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_BUSY;
	run_script(&s, "exit 0", 0, &res);
	CHECK(res.outcome == LR_OUT_CONFLICT);
	CHECK(s.releases == 0);

	/* Busy, then free: waited, then ran. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_BUSY;
	s.acquire[1] = LR_BUSY;
	s.acquire[2] = LR_OK;
	s.na = 3;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && res.wstatus == 0);
	CHECK(s.nacq == 3);

	/* Gone between the grant and the spawn, with time left in the
	 * wait: given back, tried again, and the command ran once, on the
	 * second grant. */
	memset(&s, 0, sizeof(s));
	s.check[0] = LR_LOST;
	s.check[1] = LR_OK;
	s.nc = 2;
	run_script(&s, "exit 3", 5000, &res);
	CHECK(res.outcome == LR_OUT_CHILD);
	CHECK(WIFEXITED(res.wstatus) && WEXITSTATUS(res.wstatus) == 3);
	CHECK(s.nacq == 2 && s.nchk == 2 && s.releases == 2);
	CHECK(!res.lost_early);

	/* The same with -n: 124, and no command ran. */
	memset(&s, 0, sizeof(s));
	s.check[0] = LR_LOST;
	run_script(&s, "exit 0", 0, &res);
	CHECK(res.outcome == LR_OUT_LOST && res.lost_early);
	CHECK(s.nacq == 1 && s.releases == 1 && res.wstatus == 0);

	/* ...and with --once-per, whose start is recorded: 124 as well (a
	 * new grant would be held back by our own record), the end
	 * recorded with it. */
	memset(&s, 0, sizeof(s));
	s.check[0] = LR_LOST;
	once_per = 60000;
	run_script(&s, "exit 0", 5000, &res);
	CHECK(res.outcome == LR_OUT_LOST && res.lost_early);
	CHECK(s.nacq == 1 && s.nstart == 1 && s.nend == 1);
	CHECK(s.end_status == 124);

	/* Fences the store should never give: 0, one that was negative
	 * (wrapped), and after a lease lost before the start, one not above
	 * the lost grant's.  Each is given back; the run fails (125) and
	 * never starts the command. */
	{
		static const uint64_t bad[3][2] = {
			{ 0, 0 }, { (uint64_t)-5, 0 }, { 9, 9 }
		};
		int k;

		for (k = 0; k < 3; k++) {
			memset(&s, 0, sizeof(s));
			s.fences[0] = bad[k][0];
			s.fences[1] = bad[k][1];
			s.nf = 2;
			s.check[0] = k == 2 ? LR_LOST : LR_OK;
			s.check[1] = LR_OK;
			s.nc = 2;
			run_script(&s, "exit 0", 5000, &res);
			CHECK(res.outcome == LR_OUT_FAILED);
			CHECK(strstr(res.err.msg, "unexpected reply from the "
						  "store") != NULL);
			CHECK(s.releases == (k == 2 ? 2 : 1));
		}
	}

	/* A suspicion (the store could not tell) starts the command and
	 * renews at once. */
	memset(&s, 0, sizeof(s));
	s.check[0] = LR_ERROR;
	run_script(&s, "sleep 0.1; exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && res.wstatus == 0);
	CHECK(s.nren >= 1);

	/* Busy past -w: a conflict. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_BUSY;
	run_script(&s, "exit 0", 200, &res);
	CHECK(res.outcome == LR_OUT_CONFLICT);

	/* A fault that may heal (a timeout), with time left in the wait:
	 * tried again, then ran. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_TIMEOUT;
	s.acquire[1] = LR_TIMEOUT;
	s.acquire[2] = LR_OK;
	s.na = 3;
	run_script(&s, "exit 0", 5000, &res);
	CHECK(res.outcome == LR_OUT_CHILD && res.wstatus == 0);
	CHECK(s.nacq == 3);

	/* ... with -n: one try, a failure (125), not a conflict. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_TIMEOUT;
	run_script(&s, "exit 0", 0, &res);
	CHECK(res.outcome == LR_OUT_FAILED && s.nacq == 1);

	/* ... for the whole wait: a failure with the last fault, when the
	 * wait runs out. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_TIMEOUT;
	run_script(&s, "exit 0", 400, &res);
	CHECK(res.outcome == LR_OUT_FAILED && s.nacq >= 3);
	CHECK(strstr(res.err.msg, "did not answer") != NULL);

	/* An acquire error is leaserun's failure. */
	memset(&s, 0, sizeof(s));
	s.acquire[0] = LR_ERROR;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_FAILED);

	/* Renew says "not ours": SIGKILL at once, lost, no release. */
	memset(&s, 0, sizeof(s));
	s.renew[0] = LR_LOST;
	run_script(&s, "trap '' TERM; sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_LOST);
	CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGKILL);
	CHECK(s.releases == 0);

	/* Renewals keep failing: the stop signal first, then lost. */
	memset(&s, 0, sizeof(s));
	s.renew[0] = LR_ERROR;
	run_script(&s, "sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_LOST);
	CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGTERM);

	/* ... and a child that ignores it gets SIGKILL before D. */
	memset(&s, 0, sizeof(s));
	s.renew[0] = LR_TIMEOUT;
	run_script(&s, "trap '' TERM; sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_LOST);
	CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGKILL);

	/* An acquire whose reply came too late to run safely: given back
	 * and taken again, never a stray deadline in WAITING. */
	memset(&s, 0, sizeof(s));
	s.first_acquire_ms = 300;
	run_script(&s, "exit 5", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 5);
	CHECK(s.nacq == 2 && s.releases == 2);

	/* A store that grants a shorter TTL than asked: R and the grace
	 * shrink with it, or leaserun fails if they cannot. */
	memset(&s, 0, sizeof(s));
	s.granted_ttl = 300;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_FAILED);
	CHECK(strstr(res.err.msg, "granted a TTL of 300ms") != NULL);
	CHECK(s.releases == 1);
	/* The least TTL a store can claim (0 is "the one asked for"). */
	memset(&s, 0, sizeof(s));
	s.granted_ttl = 1;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_FAILED);
	CHECK(strstr(res.err.msg, "granted a TTL of 1ms") != NULL);
	memset(&s, 0, sizeof(s));
	s.granted_ttl = 1200;
	run_script(&s, "sleep 0.7; exit 6", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 6);

	/* Failures that recover before D change nothing. */
	memset(&s, 0, sizeof(s));
	s.renew[0] = LR_ERROR;
	s.renew[1] = LR_OK;
	s.nr = 2;
	run_script(&s, "sleep 0.5; exit 4", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 4);
	CHECK(s.releases == 1);

	/* A release that finds the lease not ours: lost, whatever the
	 * command's status or signal; a failed release changes nothing. */
	memset(&s, 0, sizeof(s));
	s.release = LR_LOST;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_LOST && res.lost_at_release);
	memset(&s, 0, sizeof(s));
	s.release = LR_LOST;
	run_script(&s, "kill -USR1 $$", -1, &res);
	CHECK(res.outcome == LR_OUT_LOST && res.lost_at_release);
	memset(&s, 0, sizeof(s));
	s.release = LR_ERROR;
	run_script(&s, "exit 2", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 2);
	CHECK(!res.lost_at_release);
}

/* --max-time, --splay and --once-per through the same loop. */
static void test_cron(void)
{
	struct lr_sup_result res;
	struct script s;
	int64_t t0;
	int i, longer;

	/* --max-time: the stop signal, and the outcome says timed out. */
	memset(&s, 0, sizeof(s));
	max_time = 300;
	t0 = lr_now_ms();
	run_script(&s, "sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_TIMEOUT);
	CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGTERM);
	/* Before the sleep would have ended by itself, however loaded the
	 * machine: the signal says who ended it. */
	CHECK(lr_now_ms() - t0 >= 300 && lr_now_ms() - t0 < 4500);
	CHECK(s.releases == 1);

	/* ... SIGKILL after the grace (200ms) for one that ignores it. */
	memset(&s, 0, sizeof(s));
	max_time = 300;
	t0 = lr_now_ms();
	run_script(&s, "trap '' TERM; sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_TIMEOUT);
	CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGKILL);
	CHECK(lr_now_ms() - t0 >= 500 && lr_now_ms() - t0 < 4500);
	CHECK(s.releases == 1);

	/* A command that ends in time is not touched. */
	memset(&s, 0, sizeof(s));
	max_time = 2000;
	run_script(&s, "exit 3", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 3);

	/* --splay: the first acquire comes after the splay, within it. */
	memset(&s, 0, sizeof(s));
	splay = 400;
	t0 = lr_now_ms();
	run_script(&s, "exit 0", 0, &res);
	CHECK(res.outcome == LR_OUT_CHILD && s.nacq == 1);
	CHECK(s.t_acq - t0 >= 0 && s.t_acq - t0 < 400 + 200);

	/* ... and not against -w: a 100ms wait still gets its second
	 * attempt after a splay longer than it (drawn until one is). */
	for (i = 0, longer = 0; i < 10 && longer < 2; i++) {
		memset(&s, 0, sizeof(s));
		s.acquire[0] = LR_BUSY;
		s.acquire[1] = LR_OK;
		s.na = 2;
		splay = 400;
		t0 = lr_now_ms();
		run_script(&s, "exit 0", 100, &res);
		if (s.t_acq - t0 < 150)
			continue;
		longer++;
		CHECK(res.outcome == LR_OUT_CHILD && s.nacq == 2);
	}
	CHECK(longer == 2);

	/* --once-per: held back, the lease given back, no command. */
	memset(&s, 0, sizeof(s));
	s.run_start = LR_BUSY;
	once_per = 5000;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_HELD_BACK);
	CHECK(res.last.known && res.last.next_ms == 4000);
	CHECK(s.nstart == 1 && s.releases == 1 && s.nend == 0);

	/* ... recorded: the run, then its end with the status. */
	memset(&s, 0, sizeof(s));
	once_per = 5000;
	run_script(&s, "exit 4", -1, &res);
	CHECK(res.outcome == LR_OUT_CHILD && WEXITSTATUS(res.wstatus) == 4);
	CHECK(s.nstart == 1 && s.nend == 1 && s.end_status == 4);
	/* ... for the start it recorded: the core keeps the fence. */
	CHECK(s.start_fence == 7 && s.end_fence == s.start_fence);
	CHECK(s.releases == 1);

	/* ... a timed-out run is recorded as 124. */
	memset(&s, 0, sizeof(s));
	once_per = 5000;
	max_time = 200;
	run_script(&s, "sleep 5", -1, &res);
	CHECK(res.outcome == LR_OUT_TIMEOUT && s.end_status == 124);

	/* ... a store that cannot record it: leaserun fails, no command. */
	memset(&s, 0, sizeof(s));
	s.run_start = LR_ERROR;
	once_per = 5000;
	run_script(&s, "exit 0", -1, &res);
	CHECK(res.outcome == LR_OUT_FAILED && s.releases == 1);
	CHECK(strstr(res.err.msg, "cannot record the start") != NULL);
	CHECK(s.nend == 0);
}

/* The hex of a digest, for comparing with FIPS 180's examples. */
static const char *hex(const unsigned char *d, size_t n)
{
	static char buf[2 * MY_SHA256_LEN + 1];
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", d[i]);
	return buf;
}

/* The MySQL store's logins hash with its own SHA-1 and SHA-256: the
 * examples of FIPS 180 (one block, two blocks, a message that fills the
 * padding's block, a million 'a's). */
static void test_sha(void)
{
	static const char two[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	static char million[1000000];
	unsigned char d[MY_SHA256_LEN];

	my_sha1("abc", 3, d);
	CHECK(!strcmp(hex(d, MY_SHA1_LEN),
		      "a9993e364706816aba3e25717850c26c9cd0d89d"));
	my_sha1(two, strlen(two), d);
	CHECK(!strcmp(hex(d, MY_SHA1_LEN),
		      "84983e441c3bd26ebaae4aa1f95129e5e54670f1"));
	my_sha1("", 0, d);
	CHECK(!strcmp(hex(d, MY_SHA1_LEN),
		      "da39a3ee5e6b4b0d3255bfef95601890afd80709"));
	my_sha256("abc", 3, d);
	CHECK(!strcmp(hex(d, MY_SHA256_LEN),
		      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	my_sha256(two, strlen(two), d);
	CHECK(!strcmp(hex(d, MY_SHA256_LEN),
		      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
	my_sha256("01234567890123456789012345678901234567890123456789012345",
		  56, d);
	CHECK(!strcmp(hex(d, MY_SHA256_LEN),
		      "83aa034bda83e458a0dc9cbce0d4e354716aa0ff770ed37ac0ed2b292052e4af"));
	memset(million, 'a', sizeof(million));
	my_sha256(million, sizeof(million), d);
	CHECK(!strcmp(hex(d, MY_SHA256_LEN),
		      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	my_sha1(million, sizeof(million), d);
	CHECK(!strcmp(hex(d, MY_SHA1_LEN),
		      "34aa973cd4c4daa4f61eeb2bdbad27316534016f"));
}

int main(void)
{
	test_durations();
	test_names();
	test_signals();
	test_urls();
	test_url_hosts();
	test_url_opts();
	test_json();
	test_scrub();
	test_url_opt_number_or_word();
	test_url_mask();
	test_exit_codes();
	test_timing();
	test_p99();
	test_state_machine();
	test_human();
	test_cron();
	test_sha();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * redis-url.c - the Redis store's URL (module redis.so): the schemes,
 * the options, the secrets, and the names of the lease's keys.  The
 * forms are listed at the top of redis.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis-int.h"

#define DEFAULT_PREFIX "leaserun:"
#define DEFAULT_PORT 6379
#define DEFAULT_SENTINEL_PORT 26379
#define MAX_SENTINELS 16
#define MAX_SEEDS 16

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- URL --------------------------------------------------------------- */

/* The guards' choices, in the order of enum guard_mode. */
static const char *const guard_modes[] = { "warn", "refuse", "ignore",
					   NULL };
/* replicas=: a number, or these (-1, -2: REPLICAS_AUTO, REPLICAS_ALL). */
static const char *const replicas_words[] = { "auto", "all", NULL };

enum {
	OPT_PREFIX,
	OPT_DB,
	OPT_TIMEOUT,
	OPT_EVICT,
	OPT_PERSIST,
	OPT_REPLICAS,
	OPT_CACERT,
	OPT_CERT,
	OPT_KEY,
	OPT_SENTINEL_USER,
	OPT_SENTINEL_PASSWORD,
	NOPTS
};
static const struct lr_url_opt url_opts[NOPTS] = {
	[OPT_PREFIX] = { "prefix", LR_OPT_STRING, 0, 0, NULL },
	[OPT_DB] = { "db", LR_OPT_UINT, 0, 100000, NULL },
	[OPT_TIMEOUT] = { "timeout", LR_OPT_DURATION, 1, 24 * 3600 * 1000,
			  NULL },
	[OPT_EVICT] = { "evict", LR_OPT_ENUM, 0, 0, guard_modes },
	[OPT_PERSIST] = { "persist", LR_OPT_ENUM, 0, 0, guard_modes },
	[OPT_REPLICAS] = { "replicas", LR_OPT_UINT, 0, 64, replicas_words },
	[OPT_CACERT] = LR_URL_TLS_OPTS, /* and OPT_CERT, OPT_KEY */
	[OPT_SENTINEL_USER] = { "sentinel_user", LR_OPT_STRING, 0, 0, NULL },
	[OPT_SENTINEL_PASSWORD] = { "sentinel_password", LR_OPT_STRING, 0, 0,
				    NULL },
};

#define GIVEN(o) (given & (1U << (o)))

/* redis+unix:///path.sock */
static enum lr_status parse_unix(struct lr_store *st, const struct lr_url *u,
				 struct lr_err *err)
{
	if (*u->hosts && strcmp(u->hosts, "localhost") != 0) {
		lr_err_set(err, "redis+unix URL: expected "
				"redis+unix:///path/to/redis.sock");
		return LR_ERROR;
	}
	if (!*u->path || strcmp(u->path, "/") == 0) {
		lr_err_set(err, "redis+unix URL: no socket path");
		return LR_ERROR;
	}
	st->sock = strdup(u->path);
	if (!st->sock) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	snprintf(st->where, sizeof(st->where), "%s", st->sock);
	snprintf(st->who, sizeof(st->who), "redis at %s", st->where);
	return LR_OK;
}

/* redis://host[:port][/db]: one host; the path is the database, put in
 * *db unless db is NULL. */
static enum lr_status parse_tcp(struct lr_store *st, const struct lr_url *u,
				union lr_url_val *db, struct lr_err *err)
{
	struct lr_url_host *h;
	size_t n;

	if (lr_url_hosts(u, "redis", "127.0.0.1", DEFAULT_PORT, 1, &h, &n,
			 err->msg, sizeof(err->msg)) < 0) {
		lr_url_hosts_free(h, n);
		return LR_ERROR;
	}
	node_set(st, h[0].host, h[0].port);
	h[0].host = NULL;
	lr_url_hosts_free(h, n);
	if (*u->path && strcmp(u->path, "/") != 0) {
		const char *p = u->path + 1;
		int64_t v = -1;

		while (*p >= '0' && *p <= '9' && v <= url_opts[OPT_DB].max)
			v = (v < 0 ? 0 : v * 10) + (*p++ - '0');
		if (*p || v < 0 || v > url_opts[OPT_DB].max) {
			lr_err_set(err, "redis URL: bad database number "
					"in the path (expected /N)");
			return LR_ERROR;
		}
		if (db)
			db->n = v;
	}
	return LR_OK;
}

/* redis+sentinel://host[:port][,host[:port]...]/MASTER: the sentinels
 * (port 26379 unless given) and the master's name. */
static enum lr_status parse_sentinel(struct lr_store *st,
				     const struct lr_url *u,
				     struct lr_err *err)
{
	if (lr_url_hosts(u, "redis+sentinel", NULL, DEFAULT_SENTINEL_PORT,
			 MAX_SENTINELS, &st->sentinels, &st->nsentinels,
			 err->msg, sizeof(err->msg)) < 0)
		return LR_ERROR;
	if (!*u->path || strcmp(u->path, "/") == 0 ||
	    strchr(u->path + 1, '/')) {
		lr_err_set(err, "redis+sentinel URL: expected "
				"redis+sentinel://HOST:PORT[,HOST:PORT...]/"
				"MASTER");
		return LR_ERROR;
	}
	st->master = u->path + 1;
	snprintf(st->where, sizeof(st->where), "master %s", st->master);
	snprintf(st->who, sizeof(st->who), "redis %s", st->where);
	return LR_OK;
}

/* redis+cluster://host[:port][,host[:port]...]: the seeds (port 6379
 * unless given), of which the first is asked first.  A cluster has one
 * database: a path names none. */
static enum lr_status parse_cluster(struct lr_store *st,
				    const struct lr_url *u,
				    struct lr_err *err)
{
	char *h;

	if (lr_url_hosts(u, "redis+cluster", NULL, DEFAULT_PORT, MAX_SEEDS,
			 &st->nodes, &st->nnodes, err->msg,
			 sizeof(err->msg)) < 0)
		return LR_ERROR;
	if (*u->path && strcmp(u->path, "/") != 0) {
		lr_err_set(err, "redis+cluster URL: a cluster has one "
				"database (0): expected "
				"redis+cluster://HOST:PORT[,HOST:PORT...]");
		return LR_ERROR;
	}
	st->cluster = 1;
	h = strdup(st->nodes[0].host);
	if (!h) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	node_set(st, h, st->nodes[0].port);
	return LR_OK;
}

/* Copies a secret (NULL or "" stays NULL); 0, or -1 out of memory. */
static int secret_dup(const char *v, char **out)
{
	*out = NULL;
	if (v && *v && !(*out = strdup(v)))
		return -1;
	return 0;
}

/* The options that need TLS or Sentinel, and go together; the TLS files
 * into st. */
static enum lr_status check_opts(struct lr_store *st,
				 const union lr_url_val *val, unsigned given,
				 struct lr_err *err)
{
	struct lr_url_tls t;

	if (lr_url_tls("redis", st->use_tls,
		       "rediss:// or rediss+sentinel://", val, given,
		       OPT_CACERT, &t, err->msg, sizeof(err->msg)) < 0 ||
	    lr_url_tls_pair("redis", &t, err->msg, sizeof(err->msg)) < 0)
		return LR_ERROR;
	st->cacert = t.cacert;
	st->cert = t.cert;
	st->certkey = t.key;
	if (!st->master &&
	    (GIVEN(OPT_SENTINEL_USER) || GIVEN(OPT_SENTINEL_PASSWORD))) {
		lr_err_set(err, "redis URL: sentinel_user= and "
				"sentinel_password= need redis+sentinel:// "
				"(or rediss+sentinel://)");
		return LR_ERROR;
	}
	return LR_OK;
}

/* The URL's options that are plain values, into st. */
static void take_opts(struct lr_store *st, const struct lr_store_req *req,
		      const union lr_url_val *val, unsigned given)
{
	st->db = (long)val[OPT_DB].n;
	st->cap_ms = GIVEN(OPT_TIMEOUT) ? val[OPT_TIMEOUT].n
					: clamp64(req->ttl_ms / 3, 100, 2000);
	st->evict = (enum guard_mode)val[OPT_EVICT].n;
	st->persist = (enum guard_mode)val[OPT_PERSIST].n;
	st->replicas_opt = (int)val[OPT_REPLICAS].n;
}

/* The Sentinels' user and password from the URL's options, then the
 * server's from the URL (else REDISCLI_AUTH, as redis-cli reads it):
 * copies of their own in st, and a user never without a password. */
static enum lr_status take_secrets(struct lr_store *st, const struct lr_url *u,
				   const union lr_url_val *val,
				   struct lr_err *err)
{
	if (secret_dup(val[OPT_SENTINEL_USER].s, &st->sentinel_user) < 0 ||
	    secret_dup(val[OPT_SENTINEL_PASSWORD].s, &st->sentinel_pass) < 0)
		goto oom;
	if (st->sentinel_user && !st->sentinel_pass) {
		lr_err_set(err, "redis URL names sentinel_user '%s' but no "
				"sentinel_password",
			   st->sentinel_user);
		return LR_ERROR;
	}
	if (u->user && *u->user) {
		st->user = strdup(u->user);
		if (!st->user)
			goto oom;
	}
	if (secret_dup(u->password ? u->password
				   : secure_getenv("REDISCLI_AUTH"),
		       &st->pass) < 0)
		goto oom;
	if (st->user && !st->pass) {
		lr_err_set(err, "redis URL names user '%s' but no password "
				"(put it in the URL or REDISCLI_AUTH)",
			   st->user);
		return LR_ERROR;
	}
	return LR_OK;
oom:
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* The names of the lease's keys and channels, under prefix v (each its
 * own allocation in st, freed by close()).  0, or -1 out of memory. */
static int make_keys(struct lr_store *st, const struct lr_store_req *req,
		     const char *v)
{
	const char *tok = req->token ? req->token : "";
	size_t n = strlen(v) + strlen(req->name) + strlen(tok) + 40, m;

	st->slotted = req->shared || req->limit > 1;
	st->key = malloc(n);
	st->lease_key = malloc(n);
	st->fence_key = malloc(n);
	st->chan = malloc(n);
	m = n + 40;
	st->ks_chan = malloc(m);
	st->waiters = malloc(n);
	st->wake_prefix = malloc(n);
	st->wake_chan = malloc(n);
	st->done_key = malloc(n);
	st->holders = malloc(n);
	st->limit_key = malloc(n);
	st->hold_prefix = malloc(n);
	st->slot_prefix = malloc(n);
	st->slot_key = malloc(n);
	if (!st->key || !st->lease_key || !st->fence_key || !st->chan ||
	    !st->ks_chan || !st->waiters || !st->wake_prefix ||
	    !st->wake_chan || !st->done_key || !st->holders ||
	    !st->limit_key || !st->hold_prefix || !st->slot_prefix ||
	    !st->slot_key)
		return -1;
	snprintf(st->waiters, n, "%swaiters:{%s}", v, req->name);
	snprintf(st->wake_prefix, n, "%swake:{%s}:", v, req->name);
	snprintf(st->wake_chan, n, "%s%s%s", st->wake_prefix,
		 st->slotted ? "m:" : "", tok);
	snprintf(st->done_key, n, "%sdone:{%s}:%s", v, req->name, tok);
	snprintf(st->lease_key, n, "%s{%s}", v, req->name);
	snprintf(st->hold_prefix, n, "%sholder:{%s}:", v, req->name);
	if (st->slotted)
		snprintf(st->key, n, "%s%s", st->hold_prefix, tok);
	else
		snprintf(st->key, n, "%s", st->lease_key);
	snprintf(st->fence_key, n, "%sfence:{%s}", v, req->name);
	snprintf(st->chan, n, "%sreleased:{%s}", v, req->name);
	snprintf(st->ks_chan, n + 40, "__keyspace@%ld__:%s", st->db,
		 st->lease_key);
	snprintf(st->holders, n, "%sholders:{%s}", v, req->name);
	snprintf(st->limit_key, n, "%slimit:{%s}", v, req->name);
	snprintf(st->slot_prefix, n, "%sslot:{%s}:", v, req->name);
	st->slot_key[0] = '\0';
	return 0;
}

enum lr_status parse_url(struct lr_store *st,
			 const struct lr_store_req *req,
			 struct lr_err *err)
{
	const struct lr_url *u = req->u;
	union lr_url_val val[NOPTS] = {
		[OPT_PREFIX] = { .s = DEFAULT_PREFIX },
		[OPT_DB] = { .n = 0 },
		[OPT_TIMEOUT] = { .n = 0 },
		[OPT_EVICT] = { .n = GUARD_WARN },
		[OPT_PERSIST] = { .n = GUARD_WARN },
		[OPT_REPLICAS] = { .n = REPLICAS_AUTO },
		[OPT_CACERT] = { .s = NULL },
		[OPT_CERT] = { .s = NULL },
		[OPT_KEY] = { .s = NULL },
		[OPT_SENTINEL_USER] = { .s = NULL },
		[OPT_SENTINEL_PASSWORD] = { .s = NULL },
	};
	unsigned given;
	enum lr_status s;

	st->map_owner = -1;
	if (lr_url_opts(u, "redis", url_opts, NOPTS, val, &given, err->msg,
			sizeof(err->msg)) < 0)
		return LR_ERROR;
	st->use_tls = strncmp(u->scheme, "rediss", 6) == 0;
	/* ?db= wins over the path, as it comes later in the URL. */
	if (strcmp(u->scheme, "redis+unix") == 0)
		s = parse_unix(st, u, err);
	else if (strstr(u->scheme, "+sentinel"))
		s = parse_sentinel(st, u, err);
	else if (strstr(u->scheme, "+cluster"))
		s = parse_cluster(st, u, err);
	else
		s = parse_tcp(st, u, GIVEN(OPT_DB) ? NULL : &val[OPT_DB], err);
	if (s == LR_OK)
		s = check_opts(st, val, given, err);
	if (s != LR_OK)
		return s;
	take_opts(st, req, val, given);
	if (st->cluster && st->db) {
		lr_err_set(err, "redis+cluster URL: a cluster has one "
				"database (0): drop db=%ld",
			   st->db);
		return LR_ERROR;
	}
	s = take_secrets(st, u, val, err);
	if (s != LR_OK)
		return s;
	if (make_keys(st, req, val[OPT_PREFIX].s) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	return LR_OK;
}

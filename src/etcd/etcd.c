/*
 * etcd.c - the etcd v3 store (module etcd.so).
 *
 * URL:
 *   etcd://[user:password@]host[:port][,host[:port]...][?option=value&...]
 *   etcds://...  (TLS)
 * The port defaults to 2379.  Options: prefix (default "leaserun/"),
 * cacert, cert, key (etcds:// only; else etcdctl's ETCDCTL_CACERT, ...),
 * timeout (per endpoint while others remain, default 1s).  Credentials
 * come from the URL, else from etcdctl's ETCDCTL_USER/ETCDCTL_PASSWORD.
 *
 * The store's parts: the lock is etcd-lock.c's, runs (--once-per) are
 * etcd-runs.c's, the connection they share is etcd-rpc.c's (etcd.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"

#define DEFAULT_PREFIX	   "leaserun/"
#define DEFAULT_PORT	   2379
#define CLOSE_BUDGET_MS	   1000 /* close() revokes within this */
#define DEFAULT_ATTEMPT_MS 1000 /* per endpoint when others remain */

/* ---- opening and closing ------------------------------------------------- */

static void etcd_close(struct lr_store *st)
{
	size_t i;

	if (!st)
		return;
	/* A lease we still have (busy with -n, a wait that ran out, a
	 * failure): revoking it deletes our key, so nothing stays behind. */
	if (st->lease && st->eps)
		lease_revoke(st, st->lease, lr_now_ms() + CLOSE_BUDGET_MS);
	conn_drop(st);
	lr_waitset_close(&st->ws);
	for (i = 0; i < st->neps; i++) {
		free(st->eps[i].host);
		free(st->eps[i].port);
		free(st->eps[i].label);
	}
	free(st->eps);
	free(st->cacert);
	free(st->cert);
	free(st->key);
	free(st->dir);
	free(st->user);
	lr_wipe_free(st->password);
	lr_wipe_free(st->token);
	free(st->mykey);
	free(st->run_last);
	free(st);
}

static const struct lr_url_opt url_opts[] = {
    {"prefix", LR_OPT_STRING, 0, 0, NULL},
    LR_URL_TLS_OPTS, /* O_CACERT, O_CERT, O_KEY */
    {"timeout", LR_OPT_DURATION, 1, 3600 * 1000, NULL},
};
enum { O_PREFIX, O_CACERT, O_CERT, O_KEY, O_TIMEOUT, O_N };

/* The endpoints, from the URL's hosts.  LR_OK or LR_ERROR with err. */
static enum lr_status parse_hosts(struct lr_store *st, struct lr_err *err)
{
	struct lr_url_host *hosts;
	size_t i, n;

	if (lr_url_hosts(st->req->u, "etcd", NULL, DEFAULT_PORT, 64, &hosts,
			 &n, err->msg, sizeof(err->msg)) < 0) {
		lr_url_hosts_free(hosts, n);
		return LR_ERROR;
	}
	st->eps = calloc(n, sizeof(*st->eps));
	for (i = 0; st->eps && i < n; i++) {
		struct endpoint *ep = &st->eps[i];
		char label[300], port[8];

		st->neps++;
		lr_url_host_format(&hosts[i], label, sizeof(label));
		snprintf(port, sizeof(port), "%d", hosts[i].port);
		ep->host = strdup(hosts[i].host);
		ep->port = strdup(port);
		ep->label = strdup(label);
		if (!ep->host || !ep->port || !ep->label)
			break;
	}
	lr_url_hosts_free(hosts, n);
	if (!st->eps || i < n) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	return LR_OK;
}

/* A copy of the URL's file v, else of etcdctl's variable env (NULL when
 * neither names one).  -1 out of memory. */
static int tls_file(const char *v, const char *env, char **out)
{
	if (!v)
		v = getenv(env);
	*out = v && *v ? strdup(v) : NULL;
	return v && *v && !*out ? -1 : 0;
}

/* The TLS files: the URL's, else etcdctl's variables; a certificate
 * and its key, wherever each comes from, go together.  LR_OK or
 * LR_ERROR with err. */
static enum lr_status tls_files(struct lr_store *st,
				const struct lr_url_tls *t, struct lr_err *err)
{
	if (tls_file(t->cacert, "ETCDCTL_CACERT", &st->cacert) < 0 ||
	    tls_file(t->cert, "ETCDCTL_CERT", &st->cert) < 0 ||
	    tls_file(t->key, "ETCDCTL_KEY", &st->key) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	if (lr_url_tls_pair("etcd",
			    &(struct lr_url_tls){ st->cacert, st->cert,
						  st->key },
			    err->msg, sizeof(err->msg)) < 0)
		return LR_ERROR;
	return LR_OK;
}

/* Credentials: the URL, else etcdctl's variables.  -1 out of memory. */
static int credentials(struct lr_store *st)
{
	const struct lr_url *u = st->req->u;
	const char *v;

	if (u->user && *u->user) {
		st->user = strdup(u->user);
		st->password = strdup(u->password ? u->password : "");
	} else if ((v = getenv("ETCDCTL_USER")) && *v) {
		const char *c = strchr(v, ':');

		st->user = c ? strndup(v, (size_t)(c - v)) : strdup(v);
		v = c ? c + 1 : getenv("ETCDCTL_PASSWORD");
		st->password = strdup(v ? v : "");
	}
	if ((st->user || st->password) && (!st->user || !st->password))
		return -1;
	return 0;
}

/*
 * Everything the URL (and etcdctl's environment) says: endpoints, TLS
 * files, the key prefix, the per-endpoint timeout, credentials, with the
 * grammar of url.c.  LR_OK or LR_ERROR with err.
 */
static enum lr_status parse_url(struct lr_store *st, struct lr_err *err)
{
	const struct lr_store_req *req = st->req;
	const struct lr_url *u = req->u;
	union lr_url_val val[O_N] = {
	    [O_PREFIX] = {.s = DEFAULT_PREFIX},
	    [O_TIMEOUT] = {.n = DEFAULT_ATTEMPT_MS},
	};
	struct lr_url_tls t;
	unsigned given;

	if (lr_url_opts(u, "etcd", url_opts, O_N, val, &given, err->msg,
			sizeof(err->msg)) < 0)
		return LR_ERROR;
	st->tls = strcmp(u->scheme, "etcds") == 0;
	if (lr_url_tls("etcd", st->tls, "etcds://", val, given, O_CACERT, &t,
		       err->msg, sizeof(err->msg)) < 0)
		return LR_ERROR;
	if (u->path[0] && strcmp(u->path, "/") != 0) {
		lr_err_set(err, "etcd URLs take no path (use ?prefix=%s)",
			   u->path + 1);
		return LR_ERROR;
	}
	st->attempt_ms = val[O_TIMEOUT].n;

	if (parse_hosts(st, err) != LR_OK)
		return LR_ERROR;
	if (st->tls && tls_files(st, &t, err) != LR_OK)
		return LR_ERROR;
	st->dir = malloc(strlen(val[O_PREFIX].s) + strlen(req->name) + 2);
	if (!st->dir)
		goto oom;
	sprintf(st->dir, "%s%s/", val[O_PREFIX].s, req->name);
	if (credentials(st) < 0)
		goto oom;
	return LR_OK;
oom:
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* A password in clear across a network: said once a process (an open
 * that is tried again does not say it again).  etcds:// is the cure. */
static void clear_guard(const struct lr_store *st)
{
	static int warned;
	char msg[400];
	size_t i;

	if (warned || st->tls || !st->user || !st->req->warn)
		return;
	for (i = 0; i < st->neps; i++)
		if (!lr_host_is_local(st->eps[i].host))
			break;
	if (i == st->neps)
		return;
	warned = 1;
	snprintf(msg, sizeof(msg),
		 "etcd at %s: the password and the token that it buys go "
		 "out in clear (etcd://) and cross the network; use etcds:// "
		 "(TLS)",
		 st->eps[i].label);
	st->req->warn(st->req->warn_ctx, msg);
}

static enum lr_status etcd_open(const struct lr_store_req *req,
				int64_t deadline, struct lr_store **out,
				struct lr_err *err)
{
	struct lr_store *st;
	enum lr_status s;

	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	st->regfd = -1;
	st->ka_at = -1;
	lr_waitset_init(&st->ws);
	s = parse_url(st, err);
	if (s != LR_OK)
		return s;
	clear_guard(st);
	if (lr_waitset_open(&st->ws) < 0) {
		lr_err_set(err, "cannot set up the etcd client: %s",
			   strerror(errno));
		return LR_ERROR;
	}
	/* With credentials, authenticating proves an etcd answers.  Without,
	 * the first real call does: a round trip saved per run. */
	if (st->user)
		return authenticate(st, deadline, err);
	return LR_OK;
}

static const char *const secret_env[] = {"ETCDCTL_PASSWORD", "ETCDCTL_USER",
					 NULL};

const struct lr_store_ops lr_store_ops = {
    .abi = LR_STORE_ABI,
    .name = "etcd",
    .caps = LR_CAP_LIMIT | LR_CAP_SHARED,
    .secret_env = secret_env,
    .open = etcd_open,
    .acquire = etcd_acquire,
    .wait_fd = etcd_wait_fd,
    .process = etcd_process,
    .check = etcd_check,
    .renew = etcd_renew,
    .release = etcd_release,
    .inspect = etcd_inspect,
    .break_lease = etcd_break,
    .close = etcd_close,
    .run_start = etcd_run_start,
    .run_end = etcd_run_end,
    .run_last = etcd_run_last,
    .list = etcd_list,
};

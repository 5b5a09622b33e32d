/*
 * be-etcd.c - the etcd v3 store (module etcd.so).
 *
 * Transport: etcd's v3 JSON gateway (/v3/...) over HTTP/1.1 with libcurl,
 * JSON by json-c.  Keys and values travel base64-encoded, 64-bit numbers
 * as strings.  Works with etcd 3.4 (Debian 12) and later.
 *
 * The lock (the recipe of etcd's own concurrency.Mutex, so that with
 * ?prefix= empty leaserun and "etcdctl lock" exclude each other):
 *
 *   1. grant a lease with the TTL;
 *   2. in one transaction, create PREFIX/NAME/<lease id in hex> bound to
 *      the lease if it does not exist yet, and read every key under
 *      PREFIX/NAME/;
 *   3. the key with the lowest create revision holds.  Its create
 *      revision is the fence.  Anyone else waits, watching only the key
 *      just before its own (first come, first served, no herd), and keeps
 *      its lease alive meanwhile so it keeps its place.
 *
 * While holding: renew() keeps the lease alive and then reads our key,
 * since a keepalive does not prove the key still exists; a watch on our
 * own key makes a deleted key or a revoked lease certain loss at once.
 * release() deletes our key only if its create revision is still ours,
 * then revokes the lease.  close() revokes a lease left over (a -n that
 * found the lock busy, a wait that ran out) so nothing stays behind.
 *
 * Two curl multi handles, both driven only within a caller's deadline:
 *  - "rm" runs the unary calls, one at a time, with curl_multi_poll() for
 *    the time left (the connection is kept and reused);
 *  - "wm" runs the one streaming watch with the multi socket API.  Its
 *    sockets and a timerfd (curl's timer, and the lease keepalive due while
 *    waiting) sit in an epoll set; wait_fd() hands the core that one epoll
 *    fd, and process() dispatches what is ready.  Nothing here blocks
 *    outside a call, owns a loop or starts a thread.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "backend.h"

#define DEFAULT_PREFIX	   "leaserun/"
#define DEFAULT_PORT	   "2379"
#define MAX_BODY	   (8u << 20) /* refuse replies larger than this */
#define CLOSE_BUDGET_MS	   1000	      /* close() revokes within this */
#define DEFAULT_ATTEMPT_MS 1000	      /* per endpoint when others remain */
/* The watch on our key is set up this long after acquire, so that short
 * commands never pay for its connection; it starts from the revision of
 * the acquire, so a delete in between is still seen. */
#define WATCH_DELAY_MS	   20
#define FD_LIST_MAX	   1024	      /* see st_open() */

struct buf {
	char *p;
	size_t len, cap;
	int overflow;
};

struct endpoint {
	char *base;  /* "http://127.0.0.1:2379" */
	char *label; /* "127.0.0.1:2379", for messages */
};

enum wstate { W_OFF, W_RUNNING, W_FIRED, W_BROKEN };

struct watch {
	CURL *easy;
	struct curl_slist *hdrs;
	json_tokener *tok;
	enum wstate state;
	int created;
	char *key;     /* the key watched (raw) */
	char why[160]; /* what broke it */
};

enum hold { H_IDLE, H_WAITING, H_HOLDING };

struct lr_store {
	const struct lr_store_req *req;
	struct endpoint *eps;
	size_t neps, cur;
	int tls;
	char *cacert, *cert, *key;
	char *dir; /* PREFIX NAME "/" */
	char *user, *password, *token;
	int64_t attempt_ms;
	int curl_inited;

	/* unary calls */
	CURLM *rm;
	CURL *re;
	struct buf resp;
	char curlerr[CURL_ERROR_SIZE];

	/* the watch */
	CURLM *wm;
	struct watch w;
	int epfd, tfd;
	int64_t curl_at; /* curl's timer, or -1 */
	int64_t ka_at;	 /* keepalive due while waiting, or -1 */
	int64_t watch_at; /* holding: start the watch on our key, or -1 */
	int64_t watch_rev; /* ... from this revision */

	/* the lock */
	enum hold hold;
	int64_t lease, lease_ttl_s, last_ka;
	char *mykey;
	int64_t my_crev;
	int64_t rev; /* store revision of the last reply that matters */
};

/* ---- small helpers ---------------------------------------------------- */

static int buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > MAX_BODY) {
		b->overflow = 1;
		return -1;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const char *s, size_t n)
{
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	if (!out)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16 |
			     (unsigned char)s[i + 1] << 8 |
			     (unsigned char)s[i + 2];

		*o++ = b64chars[v >> 18 & 63];
		*o++ = b64chars[v >> 12 & 63];
		*o++ = b64chars[v >> 6 & 63];
		*o++ = b64chars[v & 63];
	}
	if (i < n) {
		unsigned v = (unsigned char)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		*o++ = b64chars[v >> 18 & 63];
		*o++ = b64chars[v >> 12 & 63];
		*o++ = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* Decodes base64 into a new NUL-terminated string; NULL if malformed. */
static char *b64_decode(const char *s)
{
	size_t n = strlen(s), i;
	char *out = malloc(n / 4 * 3 + 4), *o = out;
	unsigned v = 0;
	int bits = 0;

	if (!out)
		return NULL;
	for (i = 0; i < n && s[i] != '='; i++) {
		const char *c = strchr(b64chars, s[i]);

		if (!c || !s[i]) {
			free(out);
			return NULL;
		}
		v = v << 6 | (unsigned)(c - b64chars);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (char)(v >> bits & 0xff);
		}
	}
	*o = '\0';
	return out;
}

static struct json_object *jget(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;

	if (!o || !json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

/* int64 fields come as strings; absent means 0 (proto3 defaults). */
static int64_t jget_i64(struct json_object *o, const char *k)
{
	struct json_object *v = jget(o, k);

	return v ? json_object_get_int64(v) : 0;
}

static const char *jget_str(struct json_object *o, const char *k)
{
	struct json_object *v = jget(o, k);

	return v && json_object_is_type(v, json_type_string)
		   ? json_object_get_string(v)
		   : NULL;
}

static void jadd_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void jadd_i64(struct json_object *o, const char *k, int64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v));
}

/* Adds k: base64(v). */
static int jadd_b64(struct json_object *o, const char *k, const char *v)
{
	char *e = b64_encode(v, strlen(v));

	if (!e)
		return -1;
	jadd_str(o, k, e);
	free(e);
	return 0;
}

/* The end of a prefix range: the prefix with its last byte bumped. */
static char *prefix_end(const char *p)
{
	char *e = strdup(p);
	size_t n = strlen(e);

	while (n > 0 && (unsigned char)e[n - 1] == 0xff)
		e[--n] = '\0';
	if (n > 0)
		e[n - 1] = (char)((unsigned char)e[n - 1] + 1);
	return e;
}

/* etcd's messages start with "etcdserver: "; the user needs the rest. */
static const char *etcd_msg(const char *m)
{
	if (m && strncmp(m, "etcdserver: ", 12) == 0)
		return m + 12;
	return m ? m : "unknown error";
}

/* ---- unary calls ------------------------------------------------------ */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;

	if (buf_add(b, p, size * n) < 0)
		return 0;
	return size * n;
}

static curl_socket_t open_sock(void *ud, curlsocktype purpose,
			       struct curl_sockaddr *a)
{
	(void)ud;
	(void)purpose;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void setup_easy(struct lr_store *st, CURL *e)
{
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_sock);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, st->tls ? "https" : "http");
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	if (st->tls) {
		if (st->cacert)
			curl_easy_setopt(e, CURLOPT_CAINFO, st->cacert);
		if (st->cert)
			curl_easy_setopt(e, CURLOPT_SSLCERT, st->cert);
		if (st->key)
			curl_easy_setopt(e, CURLOPT_SSLKEY, st->key);
	}
}

static struct curl_slist *make_headers(struct lr_store *st)
{
	struct curl_slist *h = NULL, *t;

	h = curl_slist_append(h, "Content-Type: application/json");
	if (h && (t = curl_slist_append(h, "Expect:")))
		h = t;
	if (h && st->token) {
		size_t n = strlen(st->token) + 32;
		char *line = malloc(n);

		if (line) {
			snprintf(line, n, "Authorization: %s", st->token);
			if ((t = curl_slist_append(h, line)))
				h = t;
			lr_wipe_free(line);
		}
	}
	return h;
}

/* Runs the prepared easy handle on rm until done or end.  Returns the curl
 * result; CURLE_OPERATION_TIMEDOUT if end passed. */
static CURLcode run_rm(struct lr_store *st, int64_t end)
{
	CURLcode rc = CURLE_OPERATION_TIMEDOUT;
	int running = 1;

	if (curl_multi_add_handle(st->rm, st->re) != CURLM_OK)
		return CURLE_FAILED_INIT;
	for (;;) {
		int64_t now;
		CURLMsg *m;
		int left;

		if (curl_multi_perform(st->rm, &running) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		while ((m = curl_multi_info_read(st->rm, &left)))
			if (m->msg == CURLMSG_DONE &&
			    m->easy_handle == st->re) {
				rc = m->data.result;
				running = -1;
			}
		if (running == -1 || running == 0) {
			if (running == 0 && rc == CURLE_OPERATION_TIMEDOUT)
				rc = CURLE_GOT_NOTHING;
			break;
		}
		now = lr_now_ms();
		if (now >= end) {
			rc = CURLE_OPERATION_TIMEDOUT;
			break;
		}
		if (end - now > INT_MAX)
			now = end - INT_MAX;
		curl_multi_poll(st->rm, NULL, 0, (int)(end - now), NULL);
	}
	curl_multi_remove_handle(st->rm, st->re);
	return rc;
}

enum failkind { F_NONE, F_TRANSPORT, F_TIMEOUT };

static int is_unavailable(const char *m)
{
	return strstr(m, "no leader") || strstr(m, "leader changed") ||
	       strstr(m, "timed out") || strstr(m, "not capable") ||
	       strstr(m, "too many requests") || strstr(m, "stopped") ||
	       strstr(m, "connection is closing");
}

static int is_token_expired(const char *m)
{
	return strstr(m, "invalid auth token") ||
	       strstr(m, "auth token expired") ||
	       strstr(m, "user name is empty");
}

static enum lr_status authenticate(struct lr_store *st, int64_t deadline,
				   struct lr_err *err);

/*
 * POST path with body obj to the current endpoint, failing over to the
 * next ones while time remains.  On LR_OK *out holds the reply (caller
 * puts it).  An etcd error reply is LR_ERROR with err filled and, if
 * etcd_err is not NULL, etcd's message copied there (so the caller can
 * react to "lease not found").
 */
static enum lr_status call(struct lr_store *st, const char *what,
			   const char *path, struct json_object *obj,
			   int64_t deadline, struct json_object **out,
			   struct lr_err *err, char *etcd_err, size_t elen)
{
	const char *body =
	    json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	/* With several endpoints, go round them twice: a member that is
	 * waiting for a new leader may answer only after the election. */
	size_t tries = 0, reauth = 0,
	       max_tries = st->neps > 1 ? 2 * st->neps : 1;
	enum failkind last = F_NONE;

	*out = NULL;
	if (etcd_err && elen)
		etcd_err[0] = '\0';
	while (tries < max_tries) {
		struct endpoint *ep = &st->eps[st->cur];
		struct curl_slist *hdrs;
		char url[512];
		int64_t now = lr_now_ms(), end = deadline;
		long code = 0;
		CURLcode rc;
		struct json_object *reply, *e;
		const char *m;

		if (now >= deadline) {
			if (last == F_NONE || last == F_TIMEOUT)
				lr_err_set(err, "etcd %s: timed out at %s",
					   what, ep->label);
			return last == F_TRANSPORT ? LR_ERROR : LR_TIMEOUT;
		}
		if (tries + 1 < max_tries && end - now > st->attempt_ms)
			end = now + st->attempt_ms;
		snprintf(url, sizeof(url), "%s%s", ep->base, path);
		st->resp.len = 0;
		st->resp.overflow = 0;
		st->curlerr[0] = '\0';
		hdrs = make_headers(st);
		curl_easy_setopt(st->re, CURLOPT_URL, url);
		curl_easy_setopt(st->re, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(st->re, CURLOPT_POSTFIELDSIZE,
				 (long)strlen(body));
		curl_easy_setopt(st->re, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(st->re, CURLOPT_TIMEOUT_MS,
				 (long)(end - now > 0 ? end - now : 1));
		rc = run_rm(st, end);
		curl_easy_setopt(st->re, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hdrs);
		if (rc != CURLE_OK) {
			if (rc == CURLE_OPERATION_TIMEDOUT) {
				last = F_TIMEOUT;
				lr_err_set(err,
					   "etcd %s: no answer from %s in "
					   "time",
					   what, ep->label);
			} else {
				long oserr = 0;

				last = F_TRANSPORT;
				curl_easy_getinfo(st->re, CURLINFO_OS_ERRNO,
						  &oserr);
				lr_err_set(err, "cannot reach etcd at %s: %s",
					   ep->label,
					   oserr ? strerror((int)oserr)
					   : st->curlerr[0]
					       ? st->curlerr
					       : curl_easy_strerror(rc));
			}
			st->cur = (st->cur + 1) % st->neps;
			tries++;
			continue;
		}
		curl_easy_getinfo(st->re, CURLINFO_RESPONSE_CODE, &code);
		reply = st->resp.len ? json_tokener_parse(st->resp.p) : NULL;
		if (code == 200 && reply &&
		    json_object_is_type(reply, json_type_object)) {
			*out = reply;
			return LR_OK;
		}
		e = reply ? jget(reply, "error") : NULL;
		m = jget_str(reply, "message");
		if (!m && e && json_object_is_type(e, json_type_string))
			m = json_object_get_string(e);
		if (!m) {
			lr_err_set(err,
				   "etcd %s: unexpected reply from %s "
				   "(HTTP %ld%s)",
				   what, ep->label, code,
				   st->resp.overflow ? ", too large" : "");
			json_object_put(reply);
			return LR_ERROR;
		}
		if (is_token_expired(m) && st->user && reauth++ == 0) {
			enum lr_status s;

			json_object_put(reply);
			s = authenticate(st, deadline, err);
			if (s != LR_OK)
				return s;
			continue;
		}
		if (is_unavailable(m) || jget_i64(reply, "code") == 14) {
			last = F_TRANSPORT;
			lr_err_set(err, "etcd %s at %s: %s", what, ep->label,
				   etcd_msg(m));
			json_object_put(reply);
			st->cur = (st->cur + 1) % st->neps;
			tries++;
			continue;
		}
		if (!st->user && strstr(m, "user name is empty")) {
			lr_err_set(err,
				   "etcd at %s requires authentication: "
				   "give etcd://USER:PASSWORD@... in "
				   "LEASERUN_URL or ETCDCTL_USER",
				   ep->label);
			json_object_put(reply);
			return LR_ERROR;
		}
		if (etcd_err && elen)
			snprintf(etcd_err, elen, "%s", etcd_msg(m));
		lr_err_set(err, "etcd %s failed at %s: %s", what, ep->label,
			   etcd_msg(m));
		json_object_put(reply);
		return LR_ERROR;
	}
	return last == F_TIMEOUT ? LR_TIMEOUT : LR_ERROR;
}

static enum lr_status authenticate(struct lr_store *st, int64_t deadline,
				   struct lr_err *err)
{
	struct json_object *o = json_object_new_object(), *r = NULL;
	enum lr_status s;
	const char *tok;
	char *user = st->user;
	char eerr[200];

	lr_wipe_free(st->token);
	st->token = NULL;
	jadd_str(o, "name", st->user);
	jadd_str(o, "password", st->password ? st->password : "");
	st->user = NULL; /* no re-authentication from inside this call */
	s = call(st, "authentication", "/v3/auth/authenticate", o, deadline, &r,
		 err, eerr, sizeof(eerr));
	st->user = user;
	/* json-c keeps a copy of the password: wipe it before freeing. */
	{
		struct json_object *pw = jget(o, "password");

		if (pw && json_object_get_string_len(pw) > 0)
			memset((char *)json_object_get_string(pw), 0,
			       (size_t)json_object_get_string_len(pw));
		json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	}
	json_object_put(o);
	if (s == LR_ERROR && eerr[0]) {
		lr_err_set(err, "etcd authentication as user '%s' failed: %s",
			   st->user, eerr);
		return LR_ERROR;
	}
	if (s != LR_OK)
		return s;
	tok = jget_str(r, "token");
	if (!tok || !*tok) {
		lr_err_set(err,
			   "etcd authentication as user '%s' returned "
			   "no token (is auth enabled?)",
			   st->user);
		json_object_put(r);
		return LR_ERROR;
	}
	st->token = strdup(tok);
	json_object_put(r);
	return st->token ? LR_OK : LR_ERROR;
}

/* ---- the watch -------------------------------------------------------- */

static void arm_timer(struct lr_store *st)
{
	struct itimerspec its = {0};
	int64_t at = -1;

	if (st->curl_at >= 0)
		at = st->curl_at;
	if (st->ka_at >= 0 && (at < 0 || st->ka_at < at))
		at = st->ka_at;
	if (st->watch_at >= 0 && (at < 0 || st->watch_at < at))
		at = st->watch_at;
	if (at >= 0) {
		if (at < 1)
			at = 1;
		its.it_value.tv_sec = at / 1000;
		its.it_value.tv_nsec = (long)(at % 1000) * 1000000 + 1;
	}
	timerfd_settime(st->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int on_wtimer(CURLM *m, long ms, void *ud)
{
	struct lr_store *st = ud;

	(void)m;
	st->curl_at = ms < 0 ? -1 : lr_now_ms() + ms;
	arm_timer(st);
	return 0;
}

static int on_wsock(CURL *e, curl_socket_t s, int what, void *ud, void *sp)
{
	struct lr_store *st = ud;
	struct epoll_event ev = {0};

	(void)e;
	(void)sp;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(st->epfd, EPOLL_CTL_DEL, s, NULL);
		return 0;
	}
	if (what & CURL_POLL_IN)
		ev.events |= EPOLLIN;
	if (what & CURL_POLL_OUT)
		ev.events |= EPOLLOUT;
	ev.data.fd = s;
	if (epoll_ctl(st->epfd, EPOLL_CTL_MOD, s, &ev) < 0 && errno == ENOENT)
		epoll_ctl(st->epfd, EPOLL_CTL_ADD, s, &ev);
	return 0;
}

static void watch_message(struct lr_store *st, struct json_object *o)
{
	struct watch *w = &st->w;
	struct json_object *r = jget(o, "result"), *evs;
	size_t i, n;

	if (!r) {
		struct json_object *e = jget(o, "error");
		const char *m = jget_str(e, "message");

		snprintf(w->why, sizeof(w->why), "etcd watch failed: %s",
			 etcd_msg(m ? m : jget_str(o, "message")));
		w->state = W_BROKEN;
		return;
	}
	if (jget(r, "created"))
		w->created = 1;
	if (jget(r, "canceled")) {
		snprintf(w->why, sizeof(w->why),
			 "etcd watch canceled by the server%s",
			 jget(r, "compact_revision") ? " (compacted)" : "");
		w->state = W_BROKEN;
		return;
	}
	evs = jget(r, "events");
	n = evs && json_object_is_type(evs, json_type_array)
		? json_object_array_length(evs)
		: 0;
	for (i = 0; i < n; i++) {
		struct json_object *ev = json_object_array_get_idx(evs, i);
		const char *t = jget_str(ev, "type");

		if (t && strcmp(t, "DELETE") == 0)
			w->state = W_FIRED;
	}
}

static size_t on_wbody(char *p, size_t size, size_t n, void *ud)
{
	struct lr_store *st = ud;
	struct watch *w = &st->w;
	size_t len = size * n, off = 0;

	while (off < len && w->state == W_RUNNING) {
		struct json_object *o;
		enum json_tokener_error e;

		while (off < len && (p[off] == '\n' || p[off] == '\r' ||
				     p[off] == ' ' || p[off] == '\t'))
			off++;
		if (off == len)
			break;
		o = json_tokener_parse_ex(w->tok, p + off, (int)(len - off));
		e = json_tokener_get_error(w->tok);
		if (e == json_tokener_continue)
			break;
		if (!o) {
			snprintf(w->why, sizeof(w->why),
				 "etcd watch sent bad JSON: %s",
				 json_tokener_error_desc(e));
			w->state = W_BROKEN;
			break;
		}
		off += json_tokener_get_parse_end(w->tok);
		json_tokener_reset(w->tok);
		watch_message(st, o);
		json_object_put(o);
	}
	return len;
}

static void watch_stop(struct lr_store *st)
{
	struct watch *w = &st->w;

	if (w->easy) {
		curl_multi_remove_handle(st->wm, w->easy);
		curl_easy_cleanup(w->easy);
		w->easy = NULL;
	}
	curl_slist_free_all(w->hdrs);
	w->hdrs = NULL;
	if (w->tok)
		json_tokener_free(w->tok);
	w->tok = NULL;
	free(w->key);
	w->key = NULL;
	w->state = W_OFF;
	w->created = 0;
	w->why[0] = '\0';
}

/* Looks for a finished watch transfer (the stream ended). */
static void watch_reap(struct lr_store *st)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(st->wm, &left))) {
		if (m->msg != CURLMSG_DONE || m->easy_handle != st->w.easy)
			continue;
		if (st->w.state == W_RUNNING) {
			long code = 0;

			curl_easy_getinfo(st->w.easy, CURLINFO_RESPONSE_CODE,
					  &code);
			if (m->data.result != CURLE_OK)
				snprintf(st->w.why, sizeof(st->w.why),
					 "etcd watch stream failed: %s",
					 curl_easy_strerror(m->data.result));
			else
				snprintf(st->w.why, sizeof(st->w.why),
					 "etcd watch stream ended (HTTP %ld)",
					 code);
			st->w.state = W_BROKEN;
		}
	}
}

/*
 * Starts watching key for deletion from revision start_rev on, without
 * blocking: the connection is made as process() runs.  Returns 0, or -1
 * if nothing could be set up (the caller then just polls less well).
 */
static int watch_start(struct lr_store *st, const char *key, int64_t start_rev)
{
	struct watch *w = &st->w;
	struct json_object *o = json_object_new_object(),
			   *c = json_object_new_object(),
			   *f = json_object_new_array();
	char url[512];
	int running;

	watch_stop(st);
	jadd_b64(c, "key", key);
	jadd_i64(c, "start_revision", start_rev);
	json_object_array_add(f, json_object_new_string("NOPUT"));
	json_object_object_add(c, "filters", f);
	json_object_object_add(o, "create_request", c);

	w->easy = curl_easy_init();
	w->tok = json_tokener_new();
	w->key = strdup(key);
	w->hdrs = make_headers(st);
	if (!w->easy || !w->tok || !w->key || !w->hdrs) {
		json_object_put(o);
		watch_stop(st);
		return -1;
	}
	setup_easy(st, w->easy);
	snprintf(url, sizeof(url), "%s/v3/watch", st->eps[st->cur].base);
	curl_easy_setopt(w->easy, CURLOPT_URL, url);
	curl_easy_setopt(
	    w->easy, CURLOPT_COPYPOSTFIELDS,
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs);
	curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_wbody);
	curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, st);
	curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)st->attempt_ms);
	json_object_put(o);
	w->state = W_RUNNING;
	if (curl_multi_add_handle(st->wm, w->easy) != CURLM_OK) {
		watch_stop(st);
		return -1;
	}
	curl_multi_socket_action(st->wm, CURL_SOCKET_TIMEOUT, 0, &running);
	watch_reap(st);
	return 0;
}

/* ---- lock operations -------------------------------------------------- */

static enum lr_status lease_grant(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	struct json_object *o = json_object_new_object(), *r = NULL;
	int64_t ttl_s = (st->req->ttl_ms + 999) / 1000, t0 = lr_now_ms();
	enum lr_status s;

	if (ttl_s < 1)
		ttl_s = 1;
	jadd_i64(o, "TTL", ttl_s);
	s = call(st, "lease grant", "/v3/lease/grant", o, deadline, &r, err,
		 NULL, 0);
	json_object_put(o);
	if (s != LR_OK)
		return s;
	st->lease = jget_i64(r, "ID");
	st->lease_ttl_s = jget_i64(r, "TTL");
	if (st->lease == 0 || st->lease_ttl_s <= 0) {
		lr_err_set(err, "etcd lease grant: %s",
			   etcd_msg(jget_str(r, "error")));
		json_object_put(r);
		st->lease = 0;
		return LR_ERROR;
	}
	json_object_put(r);
	st->last_ka = t0;
	free(st->mykey);
	st->mykey = malloc(strlen(st->dir) + 20);
	if (!st->mykey)
		return LR_ERROR;
	sprintf(st->mykey, "%s%" PRIx64, st->dir, (uint64_t)st->lease);
	st->my_crev = 0;
	return LR_OK;
}

/* One keepalive.  LR_LOST if the lease is gone (TTL 0). */
static enum lr_status lease_keepalive(struct lr_store *st, int64_t deadline,
				      struct lr_err *err)
{
	struct json_object *o = json_object_new_object(), *r = NULL, *res;
	int64_t t0 = lr_now_ms();
	enum lr_status s;

	jadd_i64(o, "ID", st->lease);
	s = call(st, "lease keepalive", "/v3/lease/keepalive", o, deadline, &r,
		 err, NULL, 0);
	json_object_put(o);
	if (s != LR_OK)
		return s;
	res = jget(r, "result");
	if (!res) {
		const char *m = jget_str(jget(r, "error"), "message");

		lr_err_set(err, "etcd lease keepalive failed: %s", etcd_msg(m));
		json_object_put(r);
		return LR_ERROR;
	}
	if (jget_i64(res, "TTL") <= 0) {
		lr_err_set(err,
			   "etcd lease %" PRIx64 " expired or was "
			   "revoked",
			   (uint64_t)st->lease);
		json_object_put(r);
		return LR_LOST;
	}
	json_object_put(r);
	st->last_ka = t0;
	return LR_OK;
}

static void lease_revoke(struct lr_store *st, int64_t lease, int64_t deadline)
{
	struct json_object *o = json_object_new_object(), *r = NULL;
	struct lr_err e;

	jadd_i64(o, "ID", lease);
	call(st, "lease revoke", "/v3/lease/revoke", o, deadline, &r, &e, NULL,
	     0);
	json_object_put(o);
	json_object_put(r);
}

/* A RangeRequest over our directory. */
static struct json_object *range_req(struct lr_store *st, int keys_only)
{
	struct json_object *rr = json_object_new_object();
	char *end = prefix_end(st->dir);

	jadd_b64(rr, "key", st->dir);
	jadd_b64(rr, "range_end", end ? end : "");
	if (keys_only)
		json_object_object_add(rr, "keys_only",
				       json_object_new_boolean(1));
	free(end);
	return rr;
}

/* The same as a transaction op. */
static struct json_object *range_op(struct lr_store *st, int keys_only)
{
	struct json_object *op = json_object_new_object();

	json_object_object_add(op, "request_range", range_req(st, keys_only));
	return op;
}

struct scan {
	char *mine_key;		    /* borrowed */
	int64_t mine;		    /* our create revision, 0 absent */
	int64_t low;		    /* lowest create revision */
	struct json_object *low_kv; /* its kv */
	int64_t pred;		    /* highest below ours */
	char *pred_key;		    /* decoded, owned */
};

/* Walks kvs; fills sc.  Returns -1 on a malformed key. */
static int scan_kvs(struct json_object *kvs, struct scan *sc)
{
	size_t i, n;

	n = kvs && json_object_is_type(kvs, json_type_array)
		? json_object_array_length(kvs)
		: 0;
	for (i = 0; i < n; i++) {
		struct json_object *kv = json_object_array_get_idx(kvs, i);
		int64_t c = jget_i64(kv, "create_revision");
		const char *k64 = jget_str(kv, "key");
		char *k = k64 ? b64_decode(k64) : NULL;

		if (!k)
			return -1;
		if (!sc->low || c < sc->low) {
			sc->low = c;
			sc->low_kv = kv;
		}
		if (sc->mine_key && strcmp(k, sc->mine_key) == 0)
			sc->mine = c;
		free(k);
	}
	if (!sc->mine)
		return 0;
	for (i = 0; i < n; i++) {
		struct json_object *kv = json_object_array_get_idx(kvs, i);
		int64_t c = jget_i64(kv, "create_revision");

		if (c < sc->mine && c > sc->pred) {
			free(sc->pred_key);
			sc->pred_key = b64_decode(jget_str(kv, "key"));
			sc->pred = c;
		}
	}
	return 0;
}

/* Creates our key if absent and reads the directory, in one txn. */
static enum lr_status enqueue(struct lr_store *st, int64_t deadline,
			      struct scan *sc, struct lr_err *err, char *eerr,
			      size_t elen)
{
	struct json_object *o = json_object_new_object(),
			   *cmp = json_object_new_array(),
			   *c = json_object_new_object(),
			   *succ = json_object_new_array(),
			   *fail = json_object_new_array(),
			   *put = json_object_new_object(),
			   *pr = json_object_new_object(), *r = NULL, *resps,
			   *last;
	char value[400];
	enum lr_status s;

	snprintf(value, sizeof(value), "%s %ld %" PRId64,
		 st->req->host ? st->req->host : "?", st->req->pid,
		 st->req->since_ms);
	jadd_b64(c, "key", st->mykey);
	jadd_str(c, "target", "CREATE");
	jadd_str(c, "result", "EQUAL");
	jadd_i64(c, "create_revision", 0);
	json_object_array_add(cmp, c);
	jadd_b64(pr, "key", st->mykey);
	jadd_b64(pr, "value", value);
	jadd_i64(pr, "lease", st->lease);
	json_object_object_add(put, "request_put", pr);
	json_object_array_add(succ, put);
	json_object_array_add(succ, range_op(st, 1));
	json_object_array_add(fail, range_op(st, 1));
	json_object_object_add(o, "compare", cmp);
	json_object_object_add(o, "success", succ);
	json_object_object_add(o, "failure", fail);
	s = call(st, "lock transaction", "/v3/kv/txn", o, deadline, &r, err,
		 eerr, elen);
	json_object_put(o);
	if (s != LR_OK)
		return s;
	st->rev = jget_i64(jget(r, "header"), "revision");
	resps = jget(r, "responses");
	last = resps && json_object_is_type(resps, json_type_array) &&
		       json_object_array_length(resps) > 0
		   ? json_object_array_get_idx(
			 resps, json_object_array_length(resps) - 1)
		   : NULL;
	memset(sc, 0, sizeof(*sc));
	sc->mine_key = st->mykey;
	if (!last ||
	    scan_kvs(jget(jget(last, "response_range"), "kvs"), sc) < 0 ||
	    !sc->mine) {
		lr_err_set(err,
			   "etcd lock transaction: our key %s is "
			   "missing from the reply",
			   st->mykey);
		json_object_put(r);
		free(sc->pred_key);
		sc->pred_key = NULL;
		return LR_ERROR;
	}
	sc->low_kv = NULL; /* points into r */
	json_object_put(r);
	return LR_OK;
}

/* ---- the store operations --------------------------------------------- */

static void st_close(struct lr_store *st);

static int add_endpoints(struct lr_store *st, const char *hosts,
			 struct lr_err *err)
{
	const char *p = hosts;

	if (!*hosts) {
		lr_err_set(err, "etcd URL names no host (etcd://host:port)");
		return -1;
	}
	while (*p) {
		size_t n = strcspn(p, ",");
		char hp[300], base[340];
		struct endpoint *ne;
		const char *colon;

		if (n == 0 || n >= sizeof(hp) - 8) {
			lr_err_set(err, "bad host list in etcd URL");
			return -1;
		}
		memcpy(hp, p, n);
		hp[n] = '\0';
		colon = strrchr(hp, ':');
		if (hp[0] == '[' ? !(colon && colon > strchr(hp, ']')) : !colon)
			strcat(hp, ":" DEFAULT_PORT);
		ne = realloc(st->eps, (st->neps + 1) * sizeof(*ne));
		if (!ne)
			return -1;
		st->eps = ne;
		snprintf(base, sizeof(base), "%s://%s",
			 st->tls ? "https" : "http", hp);
		ne[st->neps].base = strdup(base);
		ne[st->neps].label = strdup(hp);
		st->neps++;
		if (!ne[st->neps - 1].base || !ne[st->neps - 1].label)
			return -1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static char *param_or_env(const struct lr_url *u, const char *k,
			  const char *env)
{
	const char *v = lr_url_param(u, k);

	if (!v)
		v = getenv(env);
	return v && *v ? strdup(v) : NULL;
}

static enum lr_status st_open(const struct lr_store_req *req, int64_t deadline,
			      struct lr_store **out, struct lr_err *err)
{
	const struct lr_url *u = req->u;
	static const char *const known[] = {"prefix", "cacert",	 "cert",
					    "key",    "timeout", NULL};
	struct lr_store *st;
	const char *prefix, *v;
	size_t i;

	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	st->epfd = st->tfd = -1;
	st->curl_at = st->ka_at = st->watch_at = -1;
	st->attempt_ms = DEFAULT_ATTEMPT_MS;
	st->tls = strcmp(u->scheme, "etcds") == 0;

	for (i = 0; i < u->nparams; i++) {
		size_t j;

		for (j = 0; known[j]; j++)
			if (strcmp(u->params[i].key, known[j]) == 0)
				break;
		if (!known[j]) {
			lr_err_set(err,
				   "unknown etcd URL option '%s' (known: "
				   "prefix, cacert, cert, key, timeout)",
				   u->params[i].key);
			return LR_ERROR;
		}
	}
	if (u->path[0] && strcmp(u->path, "/") != 0) {
		lr_err_set(err, "etcd URLs take no path (use ?prefix=%s)",
			   u->path + 1);
		return LR_ERROR;
	}
	if ((v = lr_url_param(u, "timeout"))) {
		char *endp;
		double d = strtod(v, &endp);

		if (endp == v || d <= 0 ||
		    (*endp && strcmp(endp, "s") && strcmp(endp, "ms"))) {
			lr_err_set(err,
				   "bad etcd URL option timeout=%s "
				   "(e.g. 2s or 500ms)",
				   v);
			return LR_ERROR;
		}
		st->attempt_ms =
		    strcmp(endp, "ms") == 0 ? (int64_t)d : (int64_t)(d * 1000);
		if (st->attempt_ms < 1)
			st->attempt_ms = 1;
	}
	if (add_endpoints(st, u->hosts, err) < 0) {
		if (!err->msg[0])
			lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	if (st->tls) {
		st->cacert = param_or_env(u, "cacert", "ETCDCTL_CACERT");
		st->cert = param_or_env(u, "cert", "ETCDCTL_CERT");
		st->key = param_or_env(u, "key", "ETCDCTL_KEY");
	} else if (lr_url_param(u, "cacert") || lr_url_param(u, "cert") ||
		   lr_url_param(u, "key")) {
		lr_err_set(err, "cacert, cert and key need etcds:// (TLS)");
		return LR_ERROR;
	}
	prefix = lr_url_param(u, "prefix");
	if (!prefix)
		prefix = DEFAULT_PREFIX;
	st->dir = malloc(strlen(prefix) + strlen(req->name) + 2);
	if (!st->dir) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	sprintf(st->dir, "%s%s/", prefix, req->name);

	/* Credentials: the URL, else etcdctl's variables. */
	if (u->user && *u->user) {
		st->user = strdup(u->user);
		st->password = strdup(u->password ? u->password : "");
	} else if ((v = getenv("ETCDCTL_USER")) && *v) {
		const char *c = strchr(v, ':');

		st->user = c ? strndup(v, (size_t)(c - v)) : strdup(v);
		v = c ? c + 1 : getenv("ETCDCTL_PASSWORD");
		st->password = strdup(v ? v : "");
	}

	if (curl_global_init(st->tls ? CURL_GLOBAL_SSL : CURL_GLOBAL_NOTHING)) {
		lr_err_set(err, "cannot initialise libcurl");
		return LR_ERROR;
	}
	st->curl_inited = 1;
	{
		/* libcurl 7.88 gives each multi handle a socketpair (for
		 * curl_multi_wakeup) without close-on-exec: mark what
		 * appears while the handles are made.  (Listed from /proc:
		 * a fcntl() on each possible fd cost more than a request.)
		 * A "before" list that may be cut short marks nothing: one
		 * of the user's fds must not lose its way to the command. */
		int was[FD_LIST_MAX], now[FD_LIST_MAX];
		size_t nwas = lr_open_fds(was, FD_LIST_MAX), nnow, k, j = 0;

		st->rm = curl_multi_init();
		st->wm = curl_multi_init();
		st->re = curl_easy_init();
		nnow = nwas < FD_LIST_MAX ? lr_open_fds(now, FD_LIST_MAX) : 0;
		for (k = 0; k < nnow; k++) {
			int fl;

			while (j < nwas && was[j] < now[k])
				j++;
			if ((j == nwas || was[j] != now[k]) &&
			    (fl = fcntl(now[k], F_GETFD)) != -1)
				fcntl(now[k], F_SETFD, fl | FD_CLOEXEC);
		}
	}
	st->epfd = epoll_create1(EPOLL_CLOEXEC);
	st->tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!st->rm || !st->wm || !st->re || st->epfd < 0 || st->tfd < 0) {
		lr_err_set(err, "cannot set up etcd client: %s",
			   st->epfd < 0 || st->tfd < 0 ? strerror(errno)
						       : "libcurl failed");
		return LR_ERROR;
	}
	{
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = st->tfd};

		epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->tfd, &ev);
	}
	setup_easy(st, st->re);
	curl_easy_setopt(st->re, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(st->re, CURLOPT_WRITEDATA, &st->resp);
	curl_easy_setopt(st->re, CURLOPT_ERRORBUFFER, st->curlerr);
	curl_multi_setopt(st->wm, CURLMOPT_SOCKETFUNCTION, on_wsock);
	curl_multi_setopt(st->wm, CURLMOPT_SOCKETDATA, st);
	curl_multi_setopt(st->wm, CURLMOPT_TIMERFUNCTION, on_wtimer);
	curl_multi_setopt(st->wm, CURLMOPT_TIMERDATA, st);

	/* With credentials, authenticating proves an etcd answers.  Without,
	 * the first real call does: a round trip saved per run. */
	if (st->user)
		return authenticate(st, deadline, err);
	return LR_OK;
}

static enum lr_status st_acquire(struct lr_store *st, int64_t deadline,
				 struct lr_grant *g, struct lr_err *err)
{
	struct scan sc;
	enum lr_status s;
	char eerr[160];
	int again = 0;

	if (st->hold == H_HOLDING) {
		lr_err_set(err, "etcd store: acquire while holding");
		return LR_ERROR;
	}
retry:
	if (!st->lease) {
		s = lease_grant(st, deadline, err);
		if (s != LR_OK)
			return s;
	} else {
		/* A lease from an earlier attempt: keep it alive now, within
		 * this call, so that it lasts a full TTL from after the
		 * core's t_send, as a fresh grant would. */
		s = lease_keepalive(st, deadline, err);
		if (s == LR_LOST) {
			/* Our lease ran out while we waited: we lose our
			 * place in the queue and take a new one. */
			st->lease = 0;
			if (again++)
				return LR_ERROR;
			goto retry;
		}
		if (s != LR_OK)
			return s;
	}
	s = enqueue(st, deadline, &sc, err, eerr, sizeof(eerr));
	if (s == LR_ERROR && strstr(eerr, "lease not found") && !again++) {
		st->lease = 0;
		goto retry;
	}
	if (s != LR_OK)
		return s;
	st->my_crev = sc.mine;
	if (sc.mine == sc.low) {
		free(sc.pred_key);
		st->hold = H_HOLDING;
		st->ka_at = -1;
		if (st->w.state != W_OFF)
			watch_stop(st); /* the one on our predecessor */
		st->watch_rev = st->rev + 1;
		st->watch_at = lr_now_ms() + WATCH_DELAY_MS;
		arm_timer(st);
		g->fence = (uint64_t)st->my_crev;
		g->ttl_ms = st->lease_ttl_s * 1000 < st->req->ttl_ms
				? st->lease_ttl_s * 1000
				: 0;
		return LR_OK;
	}
	/* Someone is ahead: keep our place, watch the one just before us. */
	st->hold = H_WAITING;
	if (!sc.pred_key) {
		lr_err_set(err, "etcd: cannot tell who is ahead in %s",
			   st->dir);
		return LR_ERROR;
	}
	if (!(st->w.state == W_RUNNING && st->w.key &&
	      strcmp(st->w.key, sc.pred_key) == 0))
		watch_start(st, sc.pred_key, st->rev + 1);
	free(sc.pred_key);
	st->ka_at = st->last_ka + st->req->ttl_ms / 3;
	arm_timer(st);
	lr_err_set(err, "held by another client (create revision %" PRId64 ")",
		   sc.low);
	return LR_BUSY;
}

static int st_wait_fd(struct lr_store *st, short *events)
{
	if (!st || st->epfd < 0 || st->hold == H_IDLE)
		return -1;
	*events = POLLIN;
	return st->epfd;
}

static enum lr_status st_process(struct lr_store *st, short revents,
				 int64_t deadline, struct lr_err *err)
{
	struct epoll_event evs[8];
	int n, i, running;

	(void)revents;
	n = epoll_wait(st->epfd, evs, 8, 0);
	for (i = 0; i < n; i++) {
		int fd = evs[i].data.fd;

		if (fd == st->tfd) {
			uint64_t x;
			int64_t now = lr_now_ms();

			if (read(st->tfd, &x, sizeof(x)) < 0) {
				/* not expired yet: nothing to do */
			}
			if (st->curl_at >= 0 && now >= st->curl_at) {
				st->curl_at = -1;
				curl_multi_socket_action(
				    st->wm, CURL_SOCKET_TIMEOUT, 0, &running);
			}
			if (st->hold == H_HOLDING && st->watch_at >= 0 &&
			    now >= st->watch_at) {
				st->watch_at = -1;
				watch_start(st, st->mykey, st->watch_rev);
			}
			if (st->hold == H_WAITING && st->ka_at >= 0 &&
			    now >= st->ka_at) {
				enum lr_status s;

				s = lease_keepalive(st, deadline, err);
				if (s == LR_LOST) {
					st->lease = 0;
					st->ka_at = -1;
					arm_timer(st);
					return LR_OK; /* acquire re-queues */
				}
				st->ka_at = s == LR_OK ? st->last_ka +
							     st->req->ttl_ms / 3
						       : now + 500;
			}
			arm_timer(st);
		} else {
			int flags = 0;

			if (evs[i].events & EPOLLIN)
				flags |= CURL_CSELECT_IN;
			if (evs[i].events & EPOLLOUT)
				flags |= CURL_CSELECT_OUT;
			if (evs[i].events & (EPOLLERR | EPOLLHUP))
				flags |= CURL_CSELECT_ERR;
			curl_multi_socket_action(st->wm, fd, flags, &running);
		}
	}
	watch_reap(st);

	if (st->hold == H_WAITING) {
		if (st->w.state == W_FIRED || st->w.state == W_BROKEN) {
			watch_stop(st);
			return LR_OK;
		}
		return LR_BUSY;
	}
	if (st->hold == H_HOLDING) {
		if (st->w.state == W_FIRED) {
			lr_err_set(err,
				   "etcd key %s was deleted (lease "
				   "revoked or key removed)",
				   st->mykey);
			watch_stop(st);
			return LR_LOST;
		}
		if (st->w.state == W_BROKEN) {
			lr_err_set(err, "%s", st->w.why);
			watch_stop(st);
			return LR_ERROR;
		}
	}
	return LR_OK;
}

static enum lr_status st_renew(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	struct json_object *o, *r = NULL, *kvs;
	enum lr_status s;
	int64_t crev;
	size_t n;

	if (st->hold != H_HOLDING) {
		lr_err_set(err, "etcd store: renew while not holding");
		return LR_ERROR;
	}
	s = lease_keepalive(st, deadline, err);
	if (s != LR_OK)
		return s;
	/* A keepalive does not prove our key is still there: read it. */
	o = json_object_new_object();
	jadd_b64(o, "key", st->mykey);
	s = call(st, "range", "/v3/kv/range", o, deadline, &r, err, NULL, 0);
	json_object_put(o);
	if (s != LR_OK)
		return s;
	kvs = jget(r, "kvs");
	n = kvs && json_object_is_type(kvs, json_type_array)
		? json_object_array_length(kvs)
		: 0;
	crev =
	    n ? jget_i64(json_object_array_get_idx(kvs, 0), "create_revision")
	      : 0;
	st->rev = jget_i64(jget(r, "header"), "revision");
	json_object_put(r);
	if (crev != st->my_crev) {
		lr_err_set(err, "etcd key %s %s", st->mykey,
			   crev ? "was replaced by another" : "is gone");
		return LR_LOST;
	}
	/* A watch that broke (endpoint died, compaction) starts again from
	 * the revision just proven. */
	if (st->w.state != W_RUNNING)
		watch_start(st, st->mykey, st->rev + 1);
	return LR_OK;
}

static enum lr_status st_release(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	struct json_object *o = json_object_new_object(),
			   *cmp = json_object_new_array(),
			   *c = json_object_new_object(),
			   *succ = json_object_new_array(),
			   *del = json_object_new_object(),
			   *dr = json_object_new_object(), *r = NULL;
	enum lr_status s;
	int64_t lease = st->lease;

	watch_stop(st);
	st->watch_at = -1;
	jadd_b64(c, "key", st->mykey ? st->mykey : "");
	jadd_str(c, "target", "CREATE");
	jadd_str(c, "result", "EQUAL");
	jadd_i64(c, "create_revision", st->my_crev);
	json_object_array_add(cmp, c);
	jadd_b64(dr, "key", st->mykey ? st->mykey : "");
	json_object_object_add(del, "request_delete_range", dr);
	json_object_array_add(succ, del);
	json_object_object_add(o, "compare", cmp);
	json_object_object_add(o, "success", succ);
	s = call(st, "release", "/v3/kv/txn", o, deadline, &r, err, NULL, 0);
	json_object_put(o);
	if (s == LR_OK && !jget(r, "succeeded")) {
		lr_err_set(err, "etcd key %s was no longer ours", st->mykey);
		s = LR_LOST;
	}
	json_object_put(r);
	if (lease)
		lease_revoke(st, lease, deadline);
	st->lease = 0;
	st->hold = H_IDLE;
	st->ka_at = -1;
	arm_timer(st);
	return s;
}

/* Reads the directory with values; *holder is the lowest kv or NULL. */
static enum lr_status read_dir(struct lr_store *st, int64_t deadline,
			       struct json_object **r,
			       struct json_object **holder, struct lr_err *err)
{
	struct json_object *rr = range_req(st, 0);
	struct scan sc = {0};
	enum lr_status s;

	s = call(st, "range", "/v3/kv/range", rr, deadline, r, err, NULL, 0);
	json_object_put(rr);
	*holder = NULL;
	if (s != LR_OK)
		return s;
	if (scan_kvs(jget(*r, "kvs"), &sc) < 0) {
		lr_err_set(err, "etcd range: malformed key in reply");
		return LR_ERROR;
	}
	*holder = sc.low_kv;
	return LR_OK;
}

static enum lr_status st_inspect(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err)
{
	struct json_object *r = NULL, *h;
	enum lr_status s;
	const char *v64;
	int64_t lease;

	s = read_dir(st, deadline, &r, &h, err);
	if (s != LR_OK || !h) {
		json_object_put(r);
		if (s == LR_OK)
			info->held = 0;
		return s;
	}
	info->held = 1;
	info->fence = (uint64_t)jget_i64(h, "create_revision");
	v64 = jget_str(h, "value");
	if (v64) {
		char *v = b64_decode(v64), host[256];
		long pid;
		long long since;

		if (v && sscanf(v, "%255s %ld %lld", host, &pid, &since) == 3) {
			snprintf(info->host, sizeof(info->host), "%s", host);
			info->pid = pid;
			info->since_ms = since;
		}
		free(v);
	}
	lease = jget_i64(h, "lease");
	json_object_put(r);
	if (lease) {
		struct json_object *o = json_object_new_object();

		jadd_i64(o, "ID", lease);
		s = call(st, "lease timetolive", "/v3/lease/timetolive", o,
			 deadline, &r, err, NULL, 0);
		json_object_put(o);
		if (s != LR_OK)
			return s;
		if (jget_i64(r, "TTL") >= 0)
			info->ttl_left_ms = jget_i64(r, "TTL") * 1000;
		json_object_put(r);
	}
	return LR_OK;
}

static enum lr_status st_brk(struct lr_store *st, int64_t deadline,
			     struct lr_err *err)
{
	struct json_object *r = NULL, *h, *o, *cmp, *c, *succ, *del, *dr,
			   *r2 = NULL;
	enum lr_status s;
	int64_t crev, lease;
	char *key;

	s = read_dir(st, deadline, &r, &h, err);
	if (s != LR_OK || !h) {
		json_object_put(r);
		return s; /* nothing held: nothing to break */
	}
	crev = jget_i64(h, "create_revision");
	lease = jget_i64(h, "lease");
	key = b64_decode(jget_str(h, "key"));
	json_object_put(r);
	if (!key)
		return LR_ERROR;
	/* Delete exactly that holder's key (not a newer one), then its
	 * lease, so a process that still thinks it holds learns at once. */
	o = json_object_new_object();
	cmp = json_object_new_array();
	c = json_object_new_object();
	succ = json_object_new_array();
	del = json_object_new_object();
	dr = json_object_new_object();
	jadd_b64(c, "key", key);
	jadd_str(c, "target", "CREATE");
	jadd_str(c, "result", "EQUAL");
	jadd_i64(c, "create_revision", crev);
	json_object_array_add(cmp, c);
	jadd_b64(dr, "key", key);
	json_object_object_add(del, "request_delete_range", dr);
	json_object_array_add(succ, del);
	json_object_object_add(o, "compare", cmp);
	json_object_object_add(o, "success", succ);
	s = call(st, "break", "/v3/kv/txn", o, deadline, &r2, err, NULL, 0);
	json_object_put(o);
	json_object_put(r2);
	free(key);
	if (s == LR_OK && lease)
		lease_revoke(st, lease, deadline);
	return s;
}

static void st_close(struct lr_store *st)
{
	size_t i;

	if (!st)
		return;
	if (st->wm)
		watch_stop(st);
	/* A lease we still have (busy with -n, a wait that ran out, a
	 * failure): revoking it deletes our key, so nothing stays behind. */
	if (st->lease && st->re && st->rm)
		lease_revoke(st, st->lease, lr_now_ms() + CLOSE_BUDGET_MS);
	if (st->re)
		curl_easy_cleanup(st->re);
	if (st->rm)
		curl_multi_cleanup(st->rm);
	if (st->wm)
		curl_multi_cleanup(st->wm);
	if (st->epfd >= 0)
		close(st->epfd);
	if (st->tfd >= 0)
		close(st->tfd);
	if (st->curl_inited)
		curl_global_cleanup();
	for (i = 0; i < st->neps; i++) {
		free(st->eps[i].base);
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
	free(st->resp.p);
	free(st->mykey);
	free(st);
}

static const char *const schemes[] = {"etcd", "etcds", NULL};
static const char *const secret_env[] = {"ETCDCTL_PASSWORD", "ETCDCTL_USER",
					 NULL};

const struct lr_store_ops lr_store_ops = {
    .abi = LR_STORE_ABI,
    .name = "etcd",
    .schemes = schemes,
    .caps = LR_CAP_TTL | LR_CAP_BREAK,
    .secret_env = secret_env,
    .open = st_open,
    .acquire = st_acquire,
    .wait_fd = st_wait_fd,
    .process = st_process,
    .renew = st_renew,
    .release = st_release,
    .inspect = st_inspect,
    .brk = st_brk,
    .close = st_close,
};

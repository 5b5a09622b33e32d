/*
 * redis-list.c - --list on the Redis store.
 *
 * Every name ever granted has a fence counter, Pfence:{NAME}, with no
 * TTL, so the names are found by SCAN MATCH Pfence:{PATTERN}, never
 * KEYS: a page of COUNT keys at a time, which keeps the server free
 * for others between pages.  Each page's names then go, at most
 * LIST_CHUNK at a time, to list.lua, a short script that reads their
 * holders as inspect.lua reads one lease's, and their waiters' queue.
 * Memory holds one page; the callback gets each lease as it comes.
 * (MATCH takes the pattern's * and ? as fnmatch(3) does; a bracket
 * expression, which the two read differently ("[!a]"), or a backslash
 * goes as *, and the core's fnmatch does the filtering.)
 *
 * On a cluster, SCAN sees the keys of the node it is sent to, so every
 * master of the slot map (CLUSTER SLOTS, asked once) is SCANned in turn,
 * each from cursor 0 to its end.  A script may read one slot only: a
 * page is sorted by slot and list.lua is given the names of one slot
 * at a time, with the first name's fence key as its key, which routes
 * it (MOVED, ASK) to the slot's master.  A master that cannot be read
 * to its end fails the listing: the names it keeps would be missing.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis-int.h"
#include "redis/scripts.h"

/* The longest name a key can give us (lease names are shorter), keys
 * SCAN looks at per call, and names per list.lua call. */
#define NAME_ROOM 255
#define LIST_COUNT "1000"
#define LIST_CHUNK 250

static const struct script list_lua = SCRIPT("list", LIST);

/* The key prefix P: the plain lease's key of the name "" is "P{}". */
static char *key_prefix(const struct lr_store *st)
{
	size_t n = strlen(st->lease_key);

	return n >= 2 ? strndup(st->lease_key, n - 2) : NULL;
}

/* "Pfence:{PATTERN}" with P's glob characters escaped. */
static char *scan_match(const char *prefix, const char *pattern)
{
	char *m = malloc(2 * strlen(prefix) + strlen(pattern) + 16), *p = m;
	const char *s;

	if (!m)
		return NULL;
	for (s = prefix; *s; s++) {
		if (strchr("*?[]\\", *s))
			*p++ = '\\';
		*p++ = *s;
	}
	sprintf(p, "fence:{%s}", strpbrk(pattern, "[\\") ? "*" : pattern);
	return m;
}

/* One lease of list.lua's reply, {name, waiters, holders()}, to fn. */
static enum lr_status one_lease(struct lr_store *st, const redisReply *e,
				lr_list_fn fn, void *arg, int *stop,
				struct lr_err *err)
{
	const redisReply *h;
	struct lr_info info;
	enum lr_status s = LR_OK;
	size_t i;

	if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 ||
	    e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[2]->type != REDIS_REPLY_ARRAY ||
	    (h = e->element[2])->elements < 3 || h->elements % 3 ||
	    h->element[0]->type != REDIS_REPLY_INTEGER) {
		lr_err_set(err, "%s: list: unexpected reply", st->who);
		return LR_ERROR;
	}
	lr_info_init(&info);
	if (e->element[1]->type == REDIS_REPLY_INTEGER)
		info.waiters = (long)e->element[1]->integer;
	info.limit = (unsigned)h->element[0]->integer;
	s = holder_add(&info, h->element[1], h->element[2], 0, err);
	if (s == LR_OK && info.n)
		info.limit = 1;
	for (i = 3; s == LR_OK && i < h->elements; i += 3)
		s = holder_add(&info, h->element[i], h->element[i + 1],
			       h->element[i + 2]->type == REDIS_REPLY_INTEGER
				       ? h->element[i + 2]->integer
				       : -1,
			       err);
	lr_info_sort(&info);
	if (s == LR_OK)
		*stop = fn(arg, e->element[0]->str, &info) != 0;
	lr_info_free(&info);
	return s;
}

/* list.lua on names (separated by spaces, all of the slot of key, the
 * first one's fence key), each lease to fn. */
static enum lr_status list_chunk(struct lr_store *st, const char *prefix,
				 const char *key, const char *names,
				 lr_list_fn fn, void *arg, int *stop,
				 int64_t deadline, struct lr_err *err)
{
	const char *argv[] = { "EVALSHA", list_lua.sha, "1", key, prefix,
			       names };
	redisReply *r = NULL;
	enum lr_status s;
	size_t i;

	s = command(st, 6, argv, deadline, &r, "list", err);
	if (s == LR_OK && is_error(r, "NOSCRIPT")) {
		freeReplyObject(r);
		argv[0] = "EVAL";
		argv[1] = list_lua.body;
		s = command(st, 6, argv, deadline, &r, "list", err);
	}
	if (s != LR_OK)
		return s;
	if (r->type != REDIS_REPLY_ARRAY) {
		lr_err_set(err, "%s: list: %.200s", st->who,
			   r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
		if (reply_heals(r))
			lr_err_heals(err);
		s = LR_ERROR;
	}
	for (i = 0; s == LR_OK && !*stop && i < r->elements; i++)
		s = one_lease(st, r->element[i], fn, arg, stop, err);
	freeReplyObject(r);
	return s;
}

/* The slot of a SCAN reply's key, for qsort(). */
static int by_slot(const void *a, const void *b)
{
	const redisReply *x = *(redisReply *const *)a,
			 *y = *(redisReply *const *)b;
	unsigned sx = x->type == REDIS_REPLY_STRING ? cluster_slot(x->str) : 0,
		 sy = y->type == REDIS_REPLY_STRING ? cluster_slot(y->str) : 0;

	return (sx > sy) - (sx < sy);
}

/* Is k a key "Pfence:{NAME}" whose NAME fits (skip: its length up to
 * the name)? */
static int fence_key(const redisReply *k, size_t skip)
{
	return k->type == REDIS_REPLY_STRING && k->len > skip &&
	       k->len - skip <= NAME_ROOM && k->str[k->len - 1] == '}' &&
	       strcspn(k->str, " ") == k->len;
}

/* The names of one SCAN page (keys "Pfence:{NAME}") into list.lua, at
 * most LIST_CHUNK a call, and on a cluster of one slot a call (the page
 * sorted by slot first). */
static enum lr_status list_page(struct lr_store *st, const char *prefix,
				redisReply *keys, lr_list_fn fn, void *arg,
				int *stop, int64_t deadline,
				struct lr_err *err)
{
	size_t skip = strlen(prefix) + strlen("fence:{"), i, at = 0;
	enum lr_status s = LR_OK;
	char *names = malloc(keys->elements * (NAME_ROOM + 1) + 1);
	const char *first = NULL;
	int n = 0;

	if (!names) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	if (st->cluster && keys->elements > 1)
		qsort(keys->element, keys->elements, sizeof(*keys->element),
		      by_slot);
	for (i = 0; s == LR_OK && !*stop && i <= keys->elements; i++) {
		const redisReply *k = i < keys->elements ? keys->element[i]
							: NULL;

		if (k && !fence_key(k, skip))
			continue;
		if (n && (!k || n == LIST_CHUNK ||
			  (st->cluster &&
			   cluster_slot(k->str) != cluster_slot(first)))) {
			s = list_chunk(st, prefix, first, names, fn, arg, stop,
				       deadline, err);
			n = 0;
			at = 0;
		}
		if (!k || s != LR_OK || *stop)
			continue;
		if (!n)
			first = k->str;
		at += (size_t)sprintf(names + at, "%s%.*s", n ? " " : "",
				      (int)(k->len - skip - 1), k->str + skip);
		n++;
	}
	free(names);
	return s;
}

/* SCANs the data node from cursor 0 to its end, each page to
 * list_page().  pin: on a cluster, the master to SCAN, which every page
 * goes to (a list.lua may have been redirected elsewhere), and which
 * must answer them all: a round trip that fell back on another node
 * fails (the cursor is that master's). */
static enum lr_status scan_node(struct lr_store *st, const char *prefix,
				const char *match,
				const struct lr_url_host *pin, lr_list_fn fn,
				void *arg, int *stop, int64_t deadline,
				struct lr_err *err)
{
	char cursor[32] = "0";
	enum lr_status s = LR_OK;
	redisReply *r = NULL;

	do {
		const char *scan[] = { "SCAN", cursor, "MATCH", match,
				       "COUNT", LIST_COUNT };
		char *h = pin ? strdup(pin->host) : NULL;

		if (pin && !h) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		if (h)
			node_set(st, h, pin->port);
		s = command(st, 6, scan, deadline, &r, "SCAN", err);
		if (s != LR_OK)
			break;
		if (pin && (st->port != pin->port ||
			    strcmp(st->host, pin->host) != 0)) {
			lr_err_set(err, "redis at %s:%d: SCAN: the master "
					"stopped answering while listed",
				   pin->host, pin->port);
			s = LR_ERROR;
		} else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			lr_err_set(err, "%s: SCAN: %.200s", st->who,
				   r->type == REDIS_REPLY_ERROR
					   ? r->str
					   : "unexpected reply");
			s = LR_ERROR;
		} else {
			snprintf(cursor, sizeof(cursor), "%s",
				 r->element[0]->str);
			s = list_page(st, prefix, r->element[1], fn, arg, stop,
				      deadline, err);
		}
		freeReplyObject(r);
		r = NULL;
	} while (s == LR_OK && !*stop && strcmp(cursor, "0") != 0);
	return s;
}

/* Every master of the cluster's slot map in turn. */
static enum lr_status scan_cluster(struct lr_store *st, const char *prefix,
				   const char *match, lr_list_fn fn,
				   void *arg, int64_t deadline,
				   struct lr_err *err)
{
	const char *slots[] = { "CLUSTER", "SLOTS" };
	struct lr_url_host *m = NULL;
	enum lr_status s;
	redisReply *r = NULL;
	size_t n = 0, i;
	int stop = 0;

	s = command(st, 2, slots, deadline, &r, "CLUSTER SLOTS", err);
	if (s != LR_OK)
		return s;
	if (cluster_masters(st, r, &m, &n, err) < 0)
		s = LR_ERROR;
	freeReplyObject(r);
	for (i = 0; s == LR_OK && !stop && i < n; i++)
		s = scan_node(st, prefix, match, &m[i], fn, arg, &stop,
			      deadline, err);
	lr_url_hosts_free(m, n);
	return s;
}

enum lr_status redis_list(struct lr_store *st, const char *pattern,
			  lr_list_fn fn, void *arg, int64_t deadline,
			  struct lr_err *err)
{
	char *prefix = key_prefix(st), *match = NULL;
	enum lr_status s;
	int stop = 0;

	if (!prefix || !(match = scan_match(prefix, pattern))) {
		lr_err_set(err, "out of memory");
		s = LR_ERROR;
	} else if (st->cluster) {
		s = scan_cluster(st, prefix, match, fn, arg, deadline, err);
	} else {
		s = scan_node(st, prefix, match, NULL, fn, arg, &stop,
			      deadline, err);
	}
	free(prefix);
	free(match);
	return s;
}

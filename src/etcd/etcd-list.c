/*
 * etcd-list.c - --list on the etcd store (module etcd.so).
 *
 * A lease's keys are its lock directory, PREFIX NAME "/", so the names
 * are found by seeking: a range from where the last name's directory ends
 * (PREFIX NAME "0", '/' bumped), with limit 1, gives the next name's
 * first key; the lease is then read as --status reads it (etcd_inspect()).
 * The range starts at the pattern's literal head, and memory holds one
 * lease at a time.  PREFIX.run/ and PREFIX.last/ (--once-per) are passed
 * over: a name cannot start with '.'.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"

/* The first key at or after from and before end (a new string in *key,
 * or NULL when there is none). */
static enum lr_status next_key(struct lr_store *st, const char *from,
			       const char *end, int64_t deadline, char **key,
			       struct lr_err *err)
{
	LrEtcd__RangeRequest q = LR_ETCD__RANGE_REQUEST__INIT;
	const LrEtcd__RangeResponse *rr;
	enum lr_status s;
	struct rpc r;

	*key = NULL;
	q.key = bytes(from);
	q.range_end = bytes(end);
	q.limit = 1;
	q.keys_only = 1;
	if (rpc_init(&r, "range", M_RANGE, &q.base,
		     &lr_etcd__range_response__descriptor) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &r, deadline, err);
	rr = (const LrEtcd__RangeResponse *)r.reply;
	if (s == LR_OK && rr->n_kvs && !(*key = bytes_dup(rr->kvs[0]->key))) {
		lr_err_set(err, "out of memory");
		s = LR_ERROR;
	}
	rpc_clear(&r);
	return s;
}

/* The lease dir names (PREFIX NAME "/"), inspected and handed to fn. */
static enum lr_status one_lease(struct lr_store *st, char *dir,
				const char *name, lr_list_fn fn, void *arg,
				int *stop, int64_t deadline,
				struct lr_err *err)
{
	const struct lr_store_req *saved_req = st->req;
	struct lr_store_req req = *saved_req;
	char *own_dir = st->dir;
	struct lr_info info;
	enum lr_status s;

	req.name = name;
	st->req = &req;
	st->dir = dir;
	lr_info_init(&info);
	s = etcd_inspect(st, deadline, &info, err);
	st->req = saved_req;
	st->dir = own_dir;
	lr_info_sort(&info);
	if (s == LR_OK)
		*stop = fn(arg, name, &info) != 0;
	lr_info_free(&info);
	return s;
}

enum lr_status etcd_list(struct lr_store *st, const char *pattern,
			 lr_list_fn fn, void *arg, int64_t deadline,
			 struct lr_err *err)
{
	size_t plen = strlen(st->dir) - 1; /* opened with the name "" */
	size_t head = strcspn(pattern, "*?[\\");
	char *from = malloc(plen + head + 1), *end = NULL, *key = NULL;
	enum lr_status s = LR_OK;
	int stop = 0;

	if (from) {
		sprintf(from, "%.*s%.*s", (int)plen, st->dir, (int)head,
			pattern);
		end = prefix_end(from);
	}
	while (s == LR_OK && !stop && from && end) {
		char *slash, *name;

		s = next_key(st, from, end, deadline, &key, err);
		if (s != LR_OK || !key)
			break;
		free(from);
		slash = strchr(key + plen, '/');
		if (!slash) { /* a key of no lease: the next one after it */
			from = malloc(strlen(key) + 2);
			if (from)
				sprintf(from, "%s\x01", key);
			free(key);
			key = NULL;
			continue;
		}
		slash[1] = '\0'; /* key is now PREFIX NAME "/" */
		name = strndup(key + plen, (size_t)(slash - key) - plen);
		if (name && *name && *name != '.')
			s = one_lease(st, key, name, fn, arg, &stop, deadline,
				      err);
		from = name ? prefix_end(key) : NULL; /* past its keys */
		free(name);
		free(key);
		key = NULL;
	}
	if (s == LR_OK && (!from || !end)) {
		lr_err_set(err, "out of memory");
		s = LR_ERROR;
	}
	free(from);
	free(end);
	free(key);
	return s;
}

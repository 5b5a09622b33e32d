/*
 * redis-runs.c - the Redis store's --once-per records (module redis.so),
 * judged by the server's clock: see "Runs" at the top of redis.c.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis-int.h"
#include "redis/scripts.h"

/* --once-per */
static const struct script run_start_lua = SCRIPT("run start", RUN_START);
static const struct script run_end_lua = SCRIPT("run end", RUN_END);

/* ---- runs (--once-per) ------------------------------------------------ */

/* Prun:{NAME}, beside Pfence:{NAME} (the prefix is what precedes
 * "fence:" there).  Free it; NULL when out of memory. */
static char *run_key(const struct lr_store *st)
{
	size_t n = strlen(st->fence_key) - strlen("fence:{}") -
		   strlen(st->req->name);
	char *k = malloc(n + strlen(st->req->name) + 8);

	if (k)
		sprintf(k, "%.*srun:{%s}", (int)n, st->fence_key,
			st->req->name);
	return k;
}

/* A bulk string or integer reply as a number; 0 for nil or junk. */
static long long reply_num(const redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer;
	if (r->type == REDIS_REPLY_STRING)
		return strtoll(r->str, NULL, 10);
	return 0;
}

/* Fills run from the record's fields f[0..6] (fence, start, host, pid,
 * period, end, status) as the server's clock stood at now. */
static void run_fill(struct lr_run *run, redisReply *const *f, long long now,
		     int64_t period)
{
	lr_run_init(run);
	if (f[1]->type != REDIS_REPLY_STRING)
		return; /* no record */
	run->known = 1;
	run->fence = (uint64_t)reply_num(f[0]);
	run->start_ms = reply_num(f[1]);
	if (f[2]->type == REDIS_REPLY_STRING)
		snprintf(run->host, sizeof(run->host), "%s", f[2]->str);
	run->pid = (long)reply_num(f[3]);
	run->period_ms = reply_num(f[4]);
	if (f[5]->type == REDIS_REPLY_STRING) {
		run->end_ms = reply_num(f[5]);
		run->status = (int)reply_num(f[6]);
	}
	lr_run_times(run, now, period);
}

/* Is r what run_start_lua returns: {1, now}, or {0, now, fence, start,
 * host, pid, period, end, status} with each field a string or nil? */
static int run_start_reply(const redisReply *r)
{
	size_t i;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER)
		return 0;
	if (r->element[0]->integer == 1)
		return r->elements == 2;
	if (r->element[0]->integer != 0 || r->elements != 9)
		return 0;
	for (i = 2; i < 9; i++)
		if (r->element[i]->type != REDIS_REPLY_STRING &&
		    r->element[i]->type != REDIS_REPLY_NIL)
			return 0;
	return 1;
}

enum lr_status redis_run_start(struct lr_store *st, int64_t period_ms,
			       uint64_t fence, int64_t deadline,
			       struct lr_run *last, struct lr_err *err)
{
	char p[24], f[24], pid[24], *key = run_key(st);
	const char *kv[5] = { key, p, f,
			      st->req->host && *st->req->host ? st->req->host
							      : "?",
			      pid };
	struct cmd cmds[1];
	const redisReply *r;
	enum lr_status s;
	int64_t pause = 50;
	int need;

	if (!key) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	snprintf(p, sizeof(p), "%lld", (long long)period_ms);
	snprintf(f, sizeof(f), "%llu", (unsigned long long)fence);
	snprintf(pid, sizeof(pid), "%ld", st->req->pid);
	/* A server restarting or failing over between the grant and the
	 * record is asked again (50ms doubling to a second) within the
	 * deadline: the script, sent again, knows our fence for ours. */
	while ((s = run_script(st, &run_start_lua, 1, 4, kv, cmds, 1, 0,
			       deadline, err)) != LR_OK &&
	       (s == LR_TIMEOUT || err->heals) &&
	       lr_now_ms() + pause < deadline) {
		poll(NULL, 0, (int)pause);
		if (pause < 1000)
			pause *= 2;
		*err = (struct lr_err){ "", 0 };
	}
	free(key);
	if (s != LR_OK)
		return s;
	r = cmds[0].r;
	if (!run_start_reply(r)) {
		lr_err_set(err, "redis at %s: run start: unexpected reply",
			   st->where);
		s = LR_ERROR;
	} else if (r->element[0]->integer != 1) {
		run_fill(last, r->element + 2, reply_num(r->element[1]),
			 period_ms);
		s = LR_BUSY;
	}
	cmds_free(cmds, 1);
	/* Recorded: as durable as a grant, on the replicas a failover would
	 * promote. */
	if (s == LR_OK &&
	    (need = replicas_needed(st)) > 0)
		s = durable(st, need, deadline, "run record", err);
	return s;
}

enum lr_status redis_run_end(struct lr_store *st, uint64_t fence, int status,
			     int64_t deadline, struct lr_err *err)
{
	char f[24], code[16], *key;
	const char *kv[3] = { NULL, f, code };
	struct cmd cmds[1];
	enum lr_status s;

	if (!(key = run_key(st))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	kv[0] = key;
	snprintf(f, sizeof(f), "%llu", (unsigned long long)fence);
	snprintf(code, sizeof(code), "%d", status);
	s = run_script(st, &run_end_lua, 1, 2, kv, cmds, 1, 0, deadline, err);
	free(key);
	if (s == LR_OK)
		cmds_free(cmds, 1);
	return s;
}

enum lr_status redis_run_last(struct lr_store *st, int64_t deadline,
			      struct lr_run *last, struct lr_err *err)
{
	char *key = run_key(st);
	const char *time[1] = { "TIME" },
		   *get[9] = { "HMGET", key,	 "fence", "start", "host",
			       "pid",	"period", "end",   "status" };
	struct cmd cmds[2] = { { 1, time, NULL }, { 9, get, NULL } };
	const redisReply *t, *v;
	enum lr_status s;

	if (!key) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = round_trip(st, cmds, 2, deadline, "HMGET", err);
	free(key);
	if (s != LR_OK)
		return s;
	t = cmds[0].r;
	v = cmds[1].r;
	if (t->type != REDIS_REPLY_ARRAY || t->elements != 2 ||
	    v->type != REDIS_REPLY_ARRAY || v->elements != 7) {
		lr_err_set(err, "redis at %s: %s", st->where,
			   v->type == REDIS_REPLY_ERROR ? v->str
							: "unexpected reply");
		s = LR_ERROR;
	} else {
		run_fill(last, v->element,
			 reply_num(t->element[0]) * 1000 +
				 reply_num(t->element[1]) / 1000,
			 0);
	}
	cmds_free(cmds, 2);
	return s;
}

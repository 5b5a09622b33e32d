/*
 * redis-watch.c - the Redis store's second connection (module redis.so):
 * a waiter's subscription, and while the lease is held the watch (CLIENT
 * TRACKING redirected to it) and the core's loop on both sockets.  See
 * "The watch", "Waiting" and "Holding" at the top of redis.c.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "redis/redis-int.h"

/* Is every change to the key by another client reported to watcher now? */
int watching(const struct lr_store *st)
{
	return st->watcher && st->watcher_id >= 0 &&
	       st->track_id == st->watcher_id;
}

/* The server refused what the watch needs (r, the reply to what): renew
 * alone from now on, and say so once when it is a matter of rights (an
 * ACL user); a server before Redis 6 just cannot. */
static void watch_refused(struct lr_store *st, const char *what,
			  const redisReply *r)
{
	char msg[640];

	if (st->watch_off)
		return;
	st->watch_off = 1;
	if (!st->req->warn || !is_error(r, "NOPERM"))
		return;
	snprintf(msg, sizeof(msg),
		 "redis at %s: cannot watch the lease key (%s: %.200s); a "
		 "deleted key is seen at the next renew",
		 st->where, what, r->str);
	st->req->warn(st->req->warn_ctx, msg);
}

/* Does r, the reply to GET of the key, hold our token? */
static int is_ours(const struct lr_store *st, const redisReply *r)
{
	size_t n = strlen(st->req->token);

	return r->type == REDIS_REPLY_STRING &&
	       strncmp(r->str, st->req->token, n) == 0 && r->str[n] == ' ';
}

/* No watch to arm later (any more): the timer for it is stopped, so
 * that the wait set does not stay readable. */
void watch_unplan(struct lr_store *st)
{
	if (st->watch_timer)
		lr_waitset_arm(&st->ws, -1);
	st->watch_at = 0;
	st->watch_timer = 0;
}

/* Opens the auxiliary connection and, in the login's round trip, learns
 * its CLIENT ID and subscribes it to our wake channel, the key's keyspace
 * channel and the tracking channel.  A SUBSCRIBE that the server refuses
 * (ACL: one error reply, not one per channel) is LR_ERROR with
 * watcher_denied set; a refused CLIENT ID leaves watcher_id at -1 (no watch,
 * waiting still works). */
enum lr_status watcher_open(struct lr_store *st, int64_t deadline,
			    struct lr_err *err)
{
	const char *id[2] = { "CLIENT", "ID" };
	const char *sub[4] = { "SUBSCRIBE", st->wake_chan, st->ks_chan,
			       "__redis__:invalidate" };
	struct cmd more[2] = { { 2, id, NULL }, { 4, sub, NULL } };
	redisReply *r[2] = { NULL, NULL };
	enum lr_status s;
	int got;

	s = connect_to(st, deadline, &st->watcher, 0, more, 2, err);
	if (s != LR_OK)
		return s;
	if (reply_heals(more[0].r) || reply_heals(more[1].r)) {
		/* Busy or loading for now: no refusal of rights. */
		lr_err_set(err, "%s: SUBSCRIBE: %.150s", st->who,
			   (reply_heals(more[0].r) ? more[0].r : more[1].r)
				   ->str);
		lr_err_heals(err);
		s = LR_ERROR;
	} else if (is_error(more[0].r, "NOAUTH")) {
		/* The first word the server says to a run without a
		 * password. */
		lr_err_set(err, "redis at %s: %.120s (give a password in the "
				"URL or REDISCLI_AUTH)",
			   st->where, more[0].r->str);
		s = LR_ERROR;
	} else if (more[1].r->type != REDIS_REPLY_ARRAY) {
		lr_err_set(err, "redis at %s: SUBSCRIBE: %.150s", st->where,
			   more[1].r->type == REDIS_REPLY_ERROR
				   ? more[1].r->str
				   : "unexpected reply");
		watch_refused(st, "SUBSCRIBE", more[1].r);
		st->watcher_denied = 1;
		s = LR_ERROR;
	} else {
		/* The other two channels' confirmations. */
		s = exchange(st, st->watcher, 2, r, step_end(st, deadline),
			     &got, st->who, "SUBSCRIBE", err);
	}
	if (s == LR_OK) {
		st->watcher_id = more[0].r->type == REDIS_REPLY_INTEGER
				     ? more[0].r->integer
				     : -1;
		if (st->watcher_id < 0)
			watch_refused(st, "CLIENT ID", more[0].r);
	}
	cmds_free(more, 2);
	replies_free(r, 2);
	if (s != LR_OK)
		drop_watcher(st);
	return s;
}

/* Appends the watch's commands to cmds[0..n) if the watch should be and
 * can be armed; returns the new count. */
int watch_add(struct lr_store *st, struct watch_cmds *w,
	      struct cmd *cmds, int n)
{
	const char *off[3] = { "CLIENT", "TRACKING", "off" };
	const char *on[9] = { "CLIENT", "TRACKING", "on",   "REDIRECT", w->id,
			      "BCAST",  "PREFIX",   st->key, "NOLOOP" };
	const char *get[2] = { "GET", st->key };

	w->at = -1;
	if (st->watch_off || !st->watcher || st->watcher_id < 0 || watching(st))
		return n;
	snprintf(w->id, sizeof(w->id), "%lld", st->watcher_id);
	w->watcher_id = st->watcher_id;
	w->gen = st->watcher->gen;
	memcpy(w->off, off, sizeof(off));
	memcpy(w->on, on, sizeof(on));
	memcpy(w->get, get, sizeof(get));
	w->at = n;
	cmds[n++] = (struct cmd){ 3, w->off, NULL };
	cmds[n++] = (struct cmd){ 9, w->on, NULL };
	cmds[n++] = (struct cmd){ 2, w->get, NULL };
	return n;
}

/* After the round trip: notes whether c now tracks the key for watcher.
 * Returns 0 if the GET found the lease gone or another's, 1 if ours or
 * if nothing was sent.  If the round trip went to another node than the
 * watcher the commands name (the master moved under it), the tracking there
 * means nothing, and neither does its answer. */
int watch_check(struct lr_store *st, const struct watch_cmds *w,
		const struct cmd *cmds)
{
	const redisReply *on;

	if (w->at < 0)
		return 1;
	on = cmds[w->at + 1].r;
	if (!st->watcher || st->watcher_id != w->watcher_id || !st->c ||
	    st->c->gen != w->gen || reply_heals(on))
		; /* not watching: the next renew arms it again */
	else if (on->type == REDIS_REPLY_ERROR)
		watch_refused(st, "CLIENT TRACKING", on);
	else
		st->track_id = st->watcher_id;
	return is_ours(st, cmds[w->at + 2].r);
}

/* Arms the watch again behind a renew that found the lease ours, after
 * a reconnect of either connection.  LR_LOST if the key is not ours any
 * more; trouble is no failure: the next renew tries again. */
enum lr_status watch_rearm(struct lr_store *st, int64_t deadline,
			   struct lr_err *err)
{
	struct lr_err ignored;
	struct cmd cmds[6];
	struct watch_cmds w;
	struct guard_cmds gd = GUARDS_NONE;
	int g, n, ours;

	if (st->watcher && st->watcher->gen != st->node_gen)
		drop_watcher(st);
	if (!st->watcher && !st->watcher_denied &&
	    watcher_open(st, deadline, &ignored) != LR_OK)
		return LR_OK;
	g = guards_add(st, GUARD_WARN, cmds, 0, &gd);
	n = watch_add(st, &w, cmds, g);
	if (n == g) /* no watch to arm: the guards wait for a renewal */
		return LR_OK;
	if (round_trip(st, cmds, n, deadline, "CLIENT TRACKING", &ignored) !=
	    LR_OK)
		return LR_OK;
	guards_check(st, &gd, cmds, &ignored);
	ours = watch_check(st, &w, cmds);
	cmds_free(cmds, n);
	return ours ? LR_OK
		    : lost(st, "was deleted or taken by another client", err);
}

int redis_wait_fd(struct lr_store *st, short *events)
{
	*events = POLLIN;
	if (!st->held)
		return st->watcher ? st->watcher->s.fd : -1;
	if (st->ws.ep < 0 && lr_waitset_open(&st->ws) < 0)
		lr_waitset_close(&st->ws);
	if (st->ws.ep >= 0 && st->watch_at && !st->watch_timer) {
		lr_waitset_arm(&st->ws, st->watch_at);
		st->watch_timer = 1;
	}
	if (st->ws.ep >= 0 &&
	    (!st->c || lr_waitset_watch(&st->ws, st->c->s.fd, EPOLLIN) == 0) &&
	    (!st->watcher ||
	     lr_waitset_watch(&st->ws, st->watcher->s.fd, EPOLLIN) == 0))
		return st->ws.ep;
	/* No wait set: watch the watch's connection, which matters most. */
	return st->watcher ? st->watcher->s.fd : st->c ? st->c->s.fd : -1;
}

/* Reads what watcher has.  Returns 1 if a message says "look now" (a
 * release, or a change to our key), 0 if not, -1 if watcher is gone. */
static int watcher_read(struct lr_store *st)
{
	struct lr_err e;
	redisReply *r;
	short want;
	int look = 0, rc;

	if (conn_fill(st->watcher, &want, &e) < 0)
		return -1;
	while ((rc = conn_reply(st->watcher, &r, &e)) > 0) {
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[0]->str, "message") == 0 &&
		    r->element[1]->type == REDIS_REPLY_STRING) {
			const char *ch = r->element[1]->str;
			const redisReply *m = r->element[2];

			if (strcmp(ch, st->wake_chan) == 0)
				look |= 1;
			else if (strcmp(ch, "__redis__:invalidate") == 0)
				look |= 2;
			else if (m->type == REDIS_REPLY_STRING &&
				 (strcmp(m->str, "del") == 0 ||
				  strcmp(m->str, "expired") == 0 ||
				  strcmp(m->str, "evicted") == 0))
				look |= 4;
		}
		freeReplyObject(r);
	}
	if (rc < 0)
		return -1;
	/* While holding, our own release message means nothing; while
	 * waiting, neither do the holder's renewals, which every waiter
	 * hears (its tracking went on with its first try). */
	look &= st->held ? ~1 : ~2;
	return look != 0;
}

/* Someone changed our key (or we did: NOLOOP does not hide a script's
 * writes), or nothing would tell us if someone had (check()): look,
 * without extending it, whether it is still ours.  A semaphore's holder
 * reads its slot's key too, in the same round trip, as its renew
 * compares both (the watch covers its holder key alone). */
static enum lr_status check_ours(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	const char *get[2] = { "GET", st->key };
	const char *slot[2] = { "GET", st->slot_key };
	struct cmd cmds[2] = { { 2, get, NULL }, { 2, slot, NULL } };
	int n = st->slotted && st->req->limit > 1 ? 2 : 1, i;
	const redisReply *r;
	enum lr_status s;

	s = round_trip(st, cmds, n, deadline, "GET", err);
	if (s != LR_OK)
		return s;
	for (i = 0; i < n && cmds[i].r->type != REDIS_REPLY_ERROR; i++)
		;
	r = n > 1 ? cmds[1].r : NULL;
	if (i < n) {
		lr_err_set(err, "redis at %s: GET %s: %s", st->where,
			   cmds[i].argv[1], cmds[i].r->str);
		s = LR_ERROR;
	} else if (!is_ours(st, cmds[0].r)) {
		s = lost(st, "was deleted or taken by another client", err);
	} else if (r && (r->type != REDIS_REPLY_STRING ||
			 strcmp(r->str, st->req->token) != 0)) {
		s = lost(st, "lost its slot (deleted or taken by another "
			     "client)",
			 err);
	}
	cmds_free(cmds, n);
	return s;
}

/* Returns which of c (bit 0) and watcher (bit 1) are readable. */
static int ready(const struct lr_store *st)
{
	struct pollfd p[2] = {
		{ .fd = st->c ? st->c->s.fd : -1, .events = POLLIN },
		{ .fd = st->watcher ? st->watcher->s.fd : -1,
		  .events = POLLIN },
	};
	int mask = 0, i;

	if (poll(p, 2, 0) <= 0)
		return 0;
	for (i = 0; i < 2; i++)
		if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
			mask |= 1 << i;
	return mask;
}

/* The command connection is readable while nothing was asked: the server
 * closed it, or broke the protocol (or TLS sent what is not ours to
 * see: a session ticket, which is nothing).  LR_OK, or LR_ERROR having
 * dropped it. */
static enum lr_status main_read(struct lr_store *st, struct lr_err *err)
{
	struct lr_err e = { "" };
	redisReply *r = NULL;
	short want;
	int rc = conn_fill(st->c, &want, &e);

	if (rc == FILL_EOF)
		lr_err_set(err, "redis at %s closed the connection",
			   st->where);
	else if (rc < 0)
		lr_err_set(err, "redis at %s: connection: %s", st->where,
			   e.msg);
	else if (conn_reply(st->c, &r, &e) != 0)
		lr_err_set(err, "redis at %s: unexpected data on the "
				"connection",
			   st->where);
	else
		return LR_OK;
	if (r)
		freeReplyObject(r);
	drop_main(st);
	return LR_ERROR;
}

enum lr_status redis_process(struct lr_store *st, short revents,
			     int64_t deadline, struct lr_err *err)
{
	enum lr_status s = LR_OK;
	int mask;

	if (!st->held) {
		int look;

		if (!st->watcher)
			return LR_OK;
		look = watcher_read(st);
		if (look < 0) {
			/* Lost the subscriber: look now; acquire subscribes
			 * again. */
			drop_watcher(st);
			return LR_OK;
		}
		return look ? LR_OK : LR_BUSY;
	}

	/* The time to start the watch (ws's timer) has come. */
	if (st->watch_at && lr_now_ms() + 1 >= st->watch_at) {
		watch_unplan(st);
		if (!st->watch_off && !watching(st)) {
			s = watch_rearm(st, deadline, err);
			if (s != LR_OK)
				return s;
		}
	}
	mask = ready(st);
	if (mask & 1)
		s = main_read(st, err);
	if (mask & 2) {
		int look = watcher_read(st);

		if (look < 0) {
			if (s == LR_OK)
				lr_err_set(err, "redis at %s closed the watch "
						"connection",
					   st->where);
			drop_watcher(st);
			s = LR_ERROR;
		} else if (look && s == LR_OK) {
			s = check_ours(st, deadline, err);
		}
	}
	return s;
}

/*
 * The last step before the command starts: is the grant still ours?
 * Where the watch is armed (a waiter's grant armed it in its round
 * trip), what the two connections already hold is read, without
 * waiting: silence says nothing changed since the GET behind TRACKING;
 * a notice (our own script's write sends one too) or a connection the
 * server closed (the watch goes with it) sends us to the key.  Where it
 * is not (a first try's grant, whose watch starts WATCH_AFTER_MS later;
 * a server that cannot track), nothing would tell us: the key is read
 * back now, one round trip within deadline.
 */
enum lr_status redis_check(struct lr_store *st, int64_t deadline,
			   struct lr_err *err)
{
	struct lr_err ignored;
	enum lr_status s;
	int mask, look = 0;

	if (!st->held) {
		lr_err_set(err, "redis at %s: the lease key %s was not held",
			   st->where, st->key);
		return LR_LOST;
	}
	if (watching(st)) {
		mask = ready(st);
		if (mask & 1)
			main_read(st, &ignored);
		if ((mask & 2) && (look = watcher_read(st)) < 0)
			drop_watcher(st);
		if (watching(st) && !look)
			return LR_OK;
	}
	s = check_ours(st, deadline, err);
	/* Ours, but the watch broke with a connection: armed again at
	 * once, from the wait set's timer (process()). */
	if (s == LR_OK && !st->watch_off && !watching(st) && !st->watch_at)
		st->watch_at = lr_now_ms();
	return s;
}

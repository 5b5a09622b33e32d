/*
 * redis.c - the Redis store, built as the module redis.so: the lease
 * (open, acquire, renew, release), and here at the top the design of
 * the whole store, whose parts redis-int.h lists.
 *
 * URLs:
 *   redis://[user[:password]@]host[:port][/db][?option=value&...]
 *   rediss://...                       the same over TLS
 *   redis+unix://[user[:password]@]/path/to/redis.sock[?db=N&...]
 *   redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER
 *   rediss+sentinel://...              sentinels and data nodes over TLS
 *   redis+cluster://[user[:password]@]host[:port][,host[:port]...]
 *   rediss+cluster://...               a Redis Cluster, from its seeds
 * Options: prefix=STR (default "leaserun:"), db=N, timeout=DURATION (cap
 * on every connect and command; default TTL/3 within [100ms, 2s]),
 * evict=warn|refuse|ignore (the maxmemory-policy guard),
 * persist=warn|refuse|ignore (the append-only file guard),
 * replicas=auto|all|N (durable grants, below); with TLS cacert=, cert=,
 * key= (as the etcd store names them); with Sentinel sentinel_user= and
 * sentinel_password= (for the sentinels: the URL's user and password are
 * the data nodes').  The password comes from the URL, else from
 * $REDISCLI_AUTH.
 *
 * Keys for lease NAME under prefix P:
 *   P{NAME}            the lease: "TOKEN FENCE PID SINCE HOST", PX = TTL
 *   Pfence:{NAME}      the fence counter: the last fence (no TTL)
 *   Pwaiters:{NAME}    the waiters' queue: tokens by arrival (sorted set)
 *   Pdone:{NAME}:TOK   "released by TOK", for a minute after a release
 *   Pwake:{NAME}:TOK   a waiter's pub/sub channel
 *   Preleased:{NAME}   pub/sub channel: one message per release or break
 *   Prun:{NAME}        --once-per: the last recorded run (hash: fence,
 *                      start, host, pid, period, end, status; no TTL)
 * and for shared holders and the slots of a semaphore (--limit N):
 *   Pholder:{NAME}:TOK a holder's grant, as P{NAME} is the plain lease's
 *   Pholders:{NAME}    their tokens, scored by when they expire (ms by
 *                      the server's TIME; a renew moves it)
 *   Plimit:{NAME}      the limit they hold with: 1 for shared holders
 *   Pslot:{NAME}:K     slot K's holder's token, PX = TTL
 * A waiter of those is queued as "m:TOK" (its wake channel too).
 * A lease name cannot hold braces, so the names cannot collide; no other
 * key starts with the lease key, so CLIENT TRACKING's PREFIX P{NAME}
 * watches the lease alone; the hash tag keeps them all in one Redis
 * Cluster slot.
 *
 * Acquire, renew and release are Lua scripts (atomic on the server), run
 * with EVALSHA and, on NOSCRIPT (a restarted server), EVAL, which loads
 * them again.  Acquire sets the lease only if absent, takes the next fence
 * and stores our token in the same script; renew and release compare the
 * token first.  Acquire by a token that already holds the lease (a retry
 * after a lost reply) extends it and returns its fence.  Release leaves
 * Pdone:{NAME}:TOKEN behind, so that a release sent again after a lost
 * reply learns that its first sending released the lease, rather than
 * taking "not ours" for a loss (exit 124).  Each script is a file of
 * src/redis/ (see "scripts" below).
 *
 * Fences: the next fence is the larger of the counter plus one and the
 * server's clock in microseconds (TIME), and is stored back in the
 * counter.  A counter that a restart without persistence, a lost second
 * of appendfsync everysec or a failover took back (or took away) then
 * cannot repeat a fence, as long as the server's clock does not go back
 * across the loss; and fences stay below 2^53, exact in a double (Lua's
 * numbers, JSON).
 *
 * Durable grants: replication is asynchronous, so a grant the master
 * acknowledged can die with it and be missing on the replica that takes
 * over, with its fence.  A grant (and a renewal) therefore counts only
 * once WAIT says the replicas have it: replicas=N waits for N,
 * replicas=all for every replica the master lists as online in INFO
 * replication (asked in the same round trip as the script), and the
 * default, replicas=auto, for a majority of the data nodes counting the
 * master, so that one slow replica of two stops nothing.  WAIT is a round
 * trip of its own after a granting script, bounded by the call's step; a
 * grant the replicas do not acknowledge in time is given back and the
 * acquire tried again within its deadline; a renewal they do not
 * acknowledge is a failed renewal (the deadline does not move).
 *
 * Sentinel: the sentinels (in the order given, starting with the last one
 * that answered) are asked SENTINEL get-master-addr-by-name; the node
 * named must say role:master (INFO replication, in the login's round
 * trip).  A node that is not the master, cannot be reached or answers
 * READONLY sends the next connect back to the sentinels, starting with
 * the one after the sentinel that named it.  While a failover is under
 * way, open and acquire try again (every 100ms) until their deadlines,
 * and fail with a fault that may heal, which the core rides out while
 * its wait lasts; renew fails and the core retries it as for any store.
 * The watch connection is dropped whenever the command connection lands
 * on another node: a CLIENT ID means nothing on another server.
 *
 * Cluster (redis-cluster.c): the first seed is the data node until a
 * MOVED names another: round_trip() then sends the same round trip there
 * (so a node that serves the slot costs no extra round trip), and an ASK
 * has it sent once to the node named, each command behind ASKING, on a
 * connection of no node (node_gen), which WAIT after a script still
 * uses and the next round trip drops.  Every key is under the one hash
 * tag {NAME}: one slot, one master for the scripts, the watch and the
 * waiters' channels (plain SUBSCRIBE on that master: the scripts' PUBSUB
 * NUMSUB counts that node's subscribers).  CLUSTER SLOTS travels with the
 * warning guards (a held lease's or a waiter's round trips), once a run
 * and after each MOVED; a node that fails sends the next connect to our
 * slot's master by that map, else to the next node known, with
 * st->retry set as under Sentinel.  A redis:// URL that meets MOVED or
 * ASK fails, saying to use redis+cluster://.
 *
 * The watch: while the lease is ours the server must tell us at once of
 * any change to the key by anyone else (a DEL, --break, expiry, eviction,
 * a successor's SET).  A second connection, watcher, learns its CLIENT ID and
 * subscribes to __redis__:invalidate (and to our wake channel and the
 * key's keyspace channel); then, on the command connection, CLIENT
 * TRACKING on REDIRECT <watcher> BCAST PREFIX P{NAME} NOLOOP and a GET of the
 * key go out in one round trip.  A change before TRACKING shows in the
 * GET; a change after it arrives on watcher, and process() reads the key back
 * (GET, no write) and says LR_LOST if it is not ours any more.
 *
 * A first try that is granted has no watcher yet: the watch starts
 * WATCH_AFTER_MS (20ms) after the grant, from the wait set's timer, as
 * above (watcher, then TRACKING and GET behind it), and nothing would tell
 * of a change before it; so check(), the last step before the command
 * starts, reads the key back (a GET, one round trip): a command never
 * starts on a key already gone.  A change after that GET shows in the
 * watch's, so it is seen at most 20ms (and two round trips) late, the
 * command running; a command that ends sooner never costs a second
 * connection (nor, over TLS, a second handshake).  A try by a waiter
 * that already has watcher arms the watch behind its acquire script, in the
 * same round trip: a change between the script and TRACKING shows in
 * the GET, and the grant is refused (the command never starts); a later
 * one reaches watcher, where check() reads what has already come, without
 * waiting, and reads the key back only if watcher told of a change (our own
 * script's write is one when tracking was on before it).  After a
 * reconnect of either connection, a renew that finds the lease ours arms
 * the watch again (TRACKING, then GET) in a round trip of its own.
 * NOLOOP does not hide the writes of our own scripts, hence a read back
 * per renew.  Without CLIENT or SUBSCRIBE rights (ACL), or before Redis
 * 6, the key is read back by check() and then checked by renew alone,
 * with a warning in the first case.
 *
 * Waiting: a first try that finds the lease busy opens watcher, subscribes
 * it, and tries again at once, joining the queue (a release between the
 * two tries is seen by the second); later tries are made with watcher
 * subscribed, so a release cannot slip between a try and the
 * subscription.  Release (and break) publish to the first waiter in the
 * queue that still has a subscriber, dropping dead ones, so one waiter
 * wakes, not all; the keyspace channel helps only if the server has
 * notify-keyspace-events on.  wait_fd() hands watcher to the core's loop; a
 * message makes process() say "try now".  Tracking notices (the holder's
 * renewals) mean nothing to a waiter.
 *
 * Holding: wait_fd() hands the loop a wait set of both sockets, so a
 * server that closes the command connection (CLIENT KILL, restart) is
 * seen at once: process() drops it and says LR_ERROR, the core renews at
 * once, and the renew reconnects and finds the lease ours (OK) or not
 * (LR_LOST).
 *
 * Guards: INFO memory (an evicting maxmemory-policy can drop a held
 * lease) and INFO persistence (without an append-only file a restart
 * loses held leases), asked at most once a run.  Each warns, refuses or
 * is ignored, as the URL says.  A refusing guard travels with the first
 * try, in its round trip, and a lease that try took is given back at
 * once.  A warning one travels with the watch, in a round trip that
 * arms it (a waiter's first try after subscribing, or the watch's own
 * 20ms after a first try's grant; else a renewal's): the two are about
 * a lease held for a while, and a command that ends within those 20ms
 * costs neither (the INFO pair added about 50us to a short run here, 2%
 * of it).
 *
 * Transport: hiredis (0.14 in Debian 12, which has no TLS) formats the
 * commands and parses the replies; the bytes move on our own socket:
 * non-blocking and close-on-exec, connected by lr_net_dial() (a host name
 * is resolved within the deadline too), and for TLS through the module
 * redis-tls.so (OpenSSL), loaded at the first TLS connection only, so that a
 * plain URL maps no TLS library.  The server's certificate is verified
 * against cacert= (else the system's CAs) and must name the host we
 * connected to (a sentinel's answer, under Sentinel); the name goes out
 * as SNI.  A read goes on until the socket (or OpenSSL) has nothing more
 * for us, so nothing decrypted waits inside OpenSSL while the loop polls
 * a socket that is not readable (SSL_pending).  Every exchange polls
 * against min(deadline, now + timeout cap); a connection that timed out
 * or failed is dropped (its late reply would be misread) and the next
 * call reconnects.  A call that finds a connection dead before any reply
 * tries a fresh one once, within the same deadline.  Whatever a server
 * sends, an exchange keeps its deadline (the clock is read on every pass
 * of the read loop) and its memory: hiredis's reader is capped (see
 * reader_new()), and every reply's shape is checked before use.
 *
 * Faults that may heal are marked (lr_err_heals()) for the core, which
 * tries again while a run may wait: a connect refused, reset or timed
 * out, a connection closed, an unreachable host, a name server that did
 * not answer; the answers LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN,
 * CLUSTERDOWN and "max number of clients reached" (which the server
 * sends before it closes); a node that is not the master.  What cannot
 * heal is left unmarked: a bad URL, a name that does not resolve,
 * WRONGPASS, NOAUTH, NOPERM, a certificate, a protocol error, and a
 * second plain connection in a row closed before a word (a TLS port).
 *
 * Runs (--once-per) are judged by the server's clock: the run_start
 * script reads TIME and compares it with the recorded start, and records
 * ours, in one atomic step; run_end stamps the end with TIME as well, and
 * only on a record that still names our fence.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis-int.h"

/* Between two tries while Sentinel moves the master, and the least time
 * worth another try (a round trip or two, and WAIT's 120ms): a shorter
 * one would end in a timeout that says less than the failure before. */
#define RETRY_PAUSE_MS 100
#define RETRY_MIN_MS 300
/* How long after a grant the watch starts (see "The watch" above). */
#define WATCH_AFTER_MS 20

/* ---- scripts ----------------------------------------------------------- */

/* The scripts are src/redis/NAME.lua, each with a header that says what
 * its KEYS and ARGV are and what it returns; src/redis/gen-scripts
 * splices in the fragments they share and writes each one's text and
 * SHA-1 into scripts.h at build time. */
#include "redis/scripts.h"

static const struct script acquire_lua = SCRIPT("acquire", ACQUIRE);
static const struct script renew_lua = SCRIPT("renew", RENEW);
static const struct script release_lua = SCRIPT("release", RELEASE);
static const struct script break_lua = SCRIPT("break", BREAK);
/* Shared holders and the slots of a semaphore. */
static const struct script acquire_slotted_lua =
	SCRIPT("acquire", ACQUIRE_SLOTTED);
static const struct script renew_slotted_lua = SCRIPT("renew", RENEW_SLOTTED);
static const struct script release_slotted_lua =
	SCRIPT("release", RELEASE_SLOTTED);
/* --status */
static const struct script inspect_lua = SCRIPT("inspect", INSPECT);

/* ---- guards ------------------------------------------------------------ */

/* The server may evict a held lease: policy is its maxmemory-policy. */
static int evicts(const struct lr_store *st, const char *policy, char *msg,
		  size_t size)
{
	if (strncmp(policy, "allkeys-", 8) != 0 &&
	    strncmp(policy, "volatile-", 9) != 0)
		return 0;
	snprintf(msg, size,
		 "redis at %s has maxmemory-policy %s: under memory pressure "
		 "it can evict a held lease; use noeviction",
		 st->where, policy);
	return 1;
}

/* A restart loses held leases: aof is aof_enabled.  Only "no append-only
 * file" can be seen in INFO; whether appendfsync is always (a crash then
 * loses nothing acknowledged) cannot. */
static int forgets(const struct lr_store *st, const char *aof, char *msg,
		   size_t size)
{
	if (strcmp(aof, "1") == 0)
		return 0;
	snprintf(msg, size,
		 "redis at %s keeps no append-only file: a restart loses held "
		 "leases and can let two commands run at once; use appendonly "
		 "yes, appendfsync always",
		 st->where);
	return 1;
}

/* A guard: r is the reply to INFO SECTION; unfit() judges FIELD's value
 * and says what is wrong in msg.  A server that is unfit, or whose value
 * cannot be read, gets a warning, or LR_ERROR naming the option OPT,
 * as mode says. */
static enum lr_status guard(const struct lr_store *st, enum guard_mode mode,
			    const char *opt, const redisReply *r,
			    const char *section, const char *field,
			    int (*unfit)(const struct lr_store *st,
					 const char *val, char *msg,
					 size_t size),
			    struct lr_err *err)
{
	char val[64], msg[512];
	enum lr_status s;

	if (mode == GUARD_IGNORE)
		return LR_OK;
	s = info_read(st, r, section, field, val, sizeof(val), msg,
		      sizeof(msg), err);
	if (s != LR_OK || (*val && !unfit(st, val, msg, sizeof(msg))))
		return s;
	if (mode == GUARD_REFUSE) {
		lr_err_set(err, "%.225s (%s=refuse)", msg, opt);
		return LR_ERROR;
	}
	if (st->req->warn)
		st->req->warn(st->req->warn_ctx, msg);
	return LR_OK;
}

/* Appends to cmds[0..n) the INFO that the guards set to mode still want
 * (once a run), noting where in g; returns the new count.  A refusing
 * guard is asked with the first try, for the command must not start on
 * an unfit server.  A warning one is asked with the watch, whose round
 * trip it joins: a waiter's first try after subscribing, or the watch's
 * own 20ms after a first try's grant, or else a renewal's; a run that
 * ends sooner never asks (see the top). */
int guards_add(const struct lr_store *st, enum guard_mode mode,
	       struct cmd *cmds, int n, struct guard_cmds *g)
{
	static const char *mem[2] = { "INFO", "memory" };
	static const char *per[2] = { "INFO", "persistence" };
	static const char *slots[2] = { "CLUSTER", "SLOTS" };

	if (st->evict == mode && !(st->asked & ASK_EVICT)) {
		g->mem = n;
		cmds[n++] = (struct cmd){ 2, mem, NULL };
	}
	if (st->persist == mode && !(st->asked & ASK_PERSIST)) {
		g->per = n;
		cmds[n++] = (struct cmd){ 2, per, NULL };
	}
	/* A cluster's nodes, for a failover: with what warns, whose round
	 * trips are a held lease's or a waiter's. */
	if (st->cluster && mode == GUARD_WARN && !(st->asked & ASK_MAP)) {
		g->map = n;
		cmds[n++] = (struct cmd){ 2, slots, NULL };
	}
	return n;
}

/* After the round trip that guards_add() joined: judges the answers. */
enum lr_status guards_check(struct lr_store *st,
			    const struct guard_cmds *g,
			    const struct cmd *cmds, struct lr_err *err)
{
	enum lr_status s = LR_OK;

	if (g->mem >= 0) {
		st->asked |= ASK_EVICT;
		s = guard(st, st->evict, "evict", cmds[g->mem].r, "memory",
			  "maxmemory_policy", evicts, err);
	}
	if (g->map >= 0) {
		st->asked |= ASK_MAP;
		cluster_map_read(st, cmds[g->map].r);
	}
	if (s == LR_OK && g->per >= 0) {
		st->asked |= ASK_PERSIST;
		s = guard(st, st->persist, "persist", cmds[g->per].r,
			  "persistence", "aof_enabled", forgets, err);
	}
	return s;
}

/* ---- the store --------------------------------------------------------- */

/* Certain loss: err says why. */
enum lr_status lost(struct lr_store *st, const char *why,
		    struct lr_err *err)
{
	lr_err_set(err, "redis at %s: the lease key %s %s", st->where, st->key,
		   why);
	st->held = 0;
	watch_unplan(st);
	drop_watcher(st);
	return LR_LOST;
}

/* After a failure s: 1 (having paused) if a failover or slow replicas
 * may explain it (st->retry) and there is time to try again before
 * deadline; else 0. */
static int again(struct lr_store *st, enum lr_status s, int64_t deadline)
{
	int retry = st->retry;

	st->retry = 0;
	if ((s != LR_ERROR && s != LR_TIMEOUT) || !retry ||
	    deadline - lr_now_ms() < RETRY_PAUSE_MS + RETRY_MIN_MS)
		return 0;
	poll(NULL, 0, RETRY_PAUSE_MS);
	return 1;
}

static void redis_close(struct lr_store *st)
{
	if (!st)
		return;
	drop_main(st);
	drop_watcher(st);
	lr_waitset_close(&st->ws);
	free(st->host);
	free(st->sock);
	free(st->user);
	lr_wipe_free(st->pass);
	lr_url_hosts_free(st->sentinels, st->nsentinels);
	lr_url_hosts_free(st->nodes, st->nnodes);
	free(st->ask_host);
	free(st->sentinel_user);
	lr_wipe_free(st->sentinel_pass);
	free(st->key);
	free(st->lease_key);
	free(st->holders);
	free(st->limit_key);
	free(st->hold_prefix);
	free(st->slot_prefix);
	free(st->slot_key);
	free(st->fence_key);
	free(st->chan);
	free(st->ks_chan);
	free(st->done_key);
	free(st->waiters);
	free(st->wake_prefix);
	free(st->wake_chan);
	free(st);
}

static enum lr_status redis_open(const struct lr_store_req *req,
				 int64_t deadline, struct lr_store **out,
				 struct lr_err *err)
{
	const char *ping[1] = { "PING" };
	struct lr_store *st;
	enum lr_status s;
	redisReply *r;

	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	lr_waitset_init(&st->ws);
	st->watcher_id = st->track_id = -1;
	s = parse_url(st, req, err);
	if (s != LR_OK)
		return s;
	if (req->token && strpbrk(req->token, " \t\r\n")) {
		lr_err_set(err, "redis store: bad owner token");
		return LR_ERROR;
	}
	do
		s = main_open(st, deadline, err);
	while (again(st, s, deadline));
	if (s != LR_OK)
		return s;
	/* The guards go with the acquire's round trips (guards_add()). */
	if (req->token)
		return LR_OK;
	/* --status, --break: check the login now, for a clear message. */
	s = command(st, 1, ping, deadline, &r, "PING", err);
	if (s != LR_OK)
		return s;
	if (r->type == REDIS_REPLY_ERROR) {
		lr_err_set(err, "redis at %s: %s%s", st->where, r->str,
			   is_error(r, "NOAUTH")
				   ? " (give a password in the URL or "
				     "REDISCLI_AUTH)"
				   : "");
		s = LR_ERROR;
	}
	freeReplyObject(r);
	return s;
}

static enum lr_status redis_release(struct lr_store *st, int64_t deadline,
				    struct lr_err *err);

/* A fence in a reply: a positive integer, or a bulk string of decimal
 * digits (what the scripts return: exact beyond 2^53); else 0.  One
 * beyond 2^64 - 1 reads as 2^64 - 1. */
static uint64_t reply_fence(const redisReply *f)
{
	const char *p;
	uint64_t v = 0;

	if (f->type == REDIS_REPLY_INTEGER)
		return f->integer > 0 ? (uint64_t)f->integer : 0;
	if (f->type != REDIS_REPLY_STRING || !f->len || f->len > 20)
		return 0;
	for (p = f->str; *p >= '0' && *p <= '9'; p++)
		v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX
					       : v * 10 + (uint64_t)(*p - '0');
	return *p ? 0 : v;
}

/* What an acquire script answered (r): {1, fence[, slot]} granted, {0,
 * pttl} busy, {2, limit} held with another limit.  ours: the read back
 * behind it found the grant ours. */
static enum lr_status acquired(struct lr_store *st, const redisReply *r,
			       int ours, struct lr_grant *g,
			       struct lr_err *err)
{
	const redisReply *f;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[0]->integer < 0 || r->element[0]->integer > 2 ||
	    (r->element[0]->integer != 1 &&
	     r->element[1]->type != REDIS_REPLY_INTEGER)) {
		lr_err_set(err, "redis at %s: acquire: unexpected reply",
			   st->where);
		return LR_ERROR;
	}
	if (r->element[0]->integer == 2) {
		lr_err_limit(err, st->req, (unsigned)r->element[1]->integer);
		return LR_ERROR;
	}
	if (r->element[0]->integer != 1)
		return LR_BUSY;
	/* Anything but a decimal fence is fence 0, which the core
	 * refuses as out of range (as it does 2^63 and more, and a fence
	 * not above the run's earlier ones): nil, "-5", "12abc". */
	f = r->element[1];
	g->fence = reply_fence(f);
	g->ttl_ms = 0;
	g->slot = 0;
	snprintf(g->node, sizeof(g->node), "%s", st->answered);
	if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_INTEGER &&
	    st->req->limit > 1) {
		st->slot = (unsigned)r->element[2]->integer;
		snprintf(st->slot_key, strlen(st->slot_prefix) + 12, "%s%u",
			 st->slot_prefix, st->slot);
		g->slot = st->slot;
	}
	/* Taken away before the watch was on: the command must not start,
	 * and there is nothing of ours to give back. */
	return ours ? LR_OK : LR_BUSY;
}

/* One try, with the guards in the first one's round trip, the replicas
 * counted (replicas=auto) and the watch armed behind the script; a grant
 * counts once the replicas have it. */
static enum lr_status try_acquire(struct lr_store *st, int64_t deadline,
				  struct lr_grant *g, struct lr_err *err)
{
	const struct lr_store_req *req = st->req;
	const char *rep[2] = { "INFO", "replication" };
	char ttl[24], pid[24], since[24], lim[16], tail[400];
	const char *host = req->host && *req->host ? req->host : "?";
	const char *queue = st->watcher ? "1" : "0";
	const char *kv[11] = { st->lease_key, st->fence_key, st->waiters,
			       st->holders,   st->limit_key, req->token,
			       ttl,	      pid,	     since,
			       host,	      queue };
	const char *mkv[13] = { st->lease_key,	 st->fence_key, st->waiters,
				st->holders,	 st->limit_key, st->key,
				req->token,	 ttl,		tail,
				queue,		 lim,		st->slot_prefix,
				st->wake_prefix };
	struct cmd cmds[MAX_CMDS];
	struct watch_cmds w;
	struct guard_cmds gd = GUARDS_NONE;
	struct lr_err gerr = { "" }, ignored;
	enum lr_status s, gs;
	const redisReply *r;
	int n, si, ri = -1, ours, need;

	snprintf(ttl, sizeof(ttl), "%lld", (long long)req->ttl_ms);
	snprintf(pid, sizeof(pid), "%ld", req->pid);
	snprintf(since, sizeof(since), "%lld", (long long)req->since_ms);
	snprintf(lim, sizeof(lim), "%u", req->limit);
	snprintf(tail, sizeof(tail), "%s %s %.300s", pid, since, host);
	n = guards_add(st, GUARD_REFUSE, cmds, 0, &gd);
	if (st->watcher) /* a waiter's try arms the watch (watch_add()) */
		n = guards_add(st, GUARD_WARN, cmds, n, &gd);
	if (st->replicas_opt < 0) {
		ri = n;
		cmds[n++] = (struct cmd){ 2, rep, NULL };
	}
	si = n++;
	n = watch_add(st, &w, cmds, n);
	if (st->slotted)
		s = run_script(st, &acquire_slotted_lua, 6, 7, mkv, cmds, n, si,
			       deadline, err);
	else
		s = run_script(st, &acquire_lua, 5, 6, kv, cmds, n, si,
			       deadline, err);
	if (s != LR_OK)
		return s;
	gs = guards_check(st, &gd, cmds, &gerr);
	if (ri >= 0)
		replicas_seen(st, cmds[ri].r);
	ours = watch_check(st, &w, cmds);
	r = cmds[si].r;
	s = acquired(st, r, ours, g, err);
	cmds_free(cmds, n);
	if (gs != LR_OK)
		*err = gerr;
	else if (s == LR_OK && (need = replicas_needed(st)) > 0)
		gs = durable(st, need, deadline, "grant", err);
	if (gs != LR_OK) {
		if (s == LR_OK) {
			st->held = 1;
			redis_release(st, deadline, &ignored);
		}
		return gs;
	}
	return s;
}

/* One try.  Once a try has found the lease busy, the second connection
 * first: a waiter needs its subscription before the try, so that a
 * release cannot slip between the two, and the watch needs watcher's id.
 * Without SUBSCRIBE rights the core's backoff timer retries, and renew
 * alone checks the key. */
static enum lr_status attempt(struct lr_store *st, int64_t deadline,
			      struct lr_grant *g, struct lr_err *err)
{
	enum lr_status s = LR_OK;

	if (st->watcher && st->watcher->gen != st->node_gen)
		drop_watcher(st);
	if (st->subscribe && !st->watcher && !st->watcher_denied)
		s = watcher_open(st, deadline, err);
	if (s == LR_OK || st->watcher_denied)
		s = try_acquire(st, deadline, g, err);
	return s;
}

static enum lr_status redis_acquire(struct lr_store *st, int64_t deadline,
				    struct lr_grant *g, struct lr_err *err)
{
	enum lr_status s;

	if (!st->req->token) {
		lr_err_set(err, "redis store: acquire without a token");
		return LR_ERROR;
	}
	st->retry = 0;
	do {
		s = attempt(st, deadline, g, err);
		if (s == LR_BUSY && !st->subscribe) {
			/* Busy: subscribe, then look again, so that a
			 * release between the first look and the
			 * subscription is not missed. */
			st->subscribe = 1;
			s = attempt(st, deadline, g, err);
		}
	} while (again(st, s, deadline));
	if (s == LR_OK) {
		st->held = 1;
		/* Granted before any subscription: the watch starts
		 * later, so that a short command never opens watcher. */
		if (!st->watch_off && !watching(st))
			st->watch_at = lr_now_ms() + WATCH_AFTER_MS;
	}
	return s;
}

/* The node of the last round trip's replies: on a cluster the master
 * of the lease's slot, under Sentinel the master of the moment. */
static const char *redis_node(struct lr_store *st)
{
	return st->answered;
}

static enum lr_status redis_renew(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	const char *rep[2] = { "INFO", "replication" };
	char ttl[24];
	const char *kv[3] = { st->key, st->req->token, ttl };
	struct cmd cmds[5];
	struct guard_cmds gd = GUARDS_NONE;
	struct lr_err ignored;
	const redisReply *r;
	enum lr_status s;
	int n, ri = -1, need;

	snprintf(ttl, sizeof(ttl), "%lld", (long long)st->req->ttl_ms);
	n = guards_add(st, GUARD_WARN, cmds, 0, &gd);
	if (st->replicas_opt < 0) { /* count the replicas too */
		ri = n;
		cmds[n++] = (struct cmd){ 2, rep, NULL };
	}
	n++; /* the script */
	if (st->slotted) {
		const int slot = st->req->limit > 1;
		const char *mkv[7] = { st->key,	  st->holders,
				       st->limit_key,
				       slot ? st->slot_key : st->key,
				       st->req->token, ttl,
				       slot ? "1" : "0" };

		s = run_script(st, &renew_slotted_lua, 4, 3, mkv, cmds, n,
			       n - 1, deadline, err);
	} else {
		s = run_script(st, &renew_lua, 1, 2, kv, cmds, n, n - 1,
			       deadline, err);
	}
	if (s != LR_OK)
		return s;
	guards_check(st, &gd, cmds, &ignored);
	if (ri >= 0)
		replicas_seen(st, cmds[ri].r);
	r = cmds[n - 1].r;
	if (r->type != REDIS_REPLY_INTEGER) {
		lr_err_set(err, "redis at %s: renew: unexpected reply",
			   st->where);
		s = LR_ERROR;
	} else if (r->integer != 1) {
		s = lost(st, "is gone or held by another owner", err);
	}
	cmds_free(cmds, n);
	/* A renewal that could die with the master does not count. */
	if (s == LR_OK && (need = replicas_needed(st)) > 0)
		s = durable(st, need, deadline, "renewal", err);
	/* Reconnected (either connection): watch again, now. */
	if (s == LR_OK && !st->watch_off && !watching(st))
		s = watch_rearm(st, deadline, err);
	return s;
}

static enum lr_status redis_release(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	const char *kv[6] = { st->key,	    st->waiters, st->done_key,
			      st->req->token, st->chan,	 st->wake_prefix };
	struct cmd cmds[1];
	const redisReply *r;
	enum lr_status s;

	st->held = 0;
	watch_unplan(st);
	drop_watcher(st);
	if (st->slotted) {
		const int slot = st->req->limit > 1;
		const char *mkv[10] = { st->key,	 st->waiters,
					slot ? st->slot_key : st->key,
					st->holders,	 st->limit_key,
					st->done_key,	 st->req->token,
					st->chan,	 st->wake_prefix,
					slot ? "1" : "0" };

		s = run_script(st, &release_slotted_lua, 6, 4, mkv, cmds, 1, 0,
			       deadline, err);
	} else {
		s = run_script(st, &release_lua, 3, 3, kv, cmds, 1, 0,
			       deadline, err);
	}
	if (s != LR_OK)
		return s;
	r = cmds[0].r;
	if (r->type != REDIS_REPLY_INTEGER) {
		lr_err_set(err, "redis at %s: release: unexpected reply",
			   st->where);
		s = LR_ERROR;
	} else if (r->integer != 1) {
		lr_err_set(err, "redis at %s: the lease key %s was no longer "
				"ours at release",
			   st->where, st->key);
		s = LR_LOST;
	}
	cmds_free(cmds, 1);
	return s;
}

/* A grant's value, "TOKEN FENCE PID SINCE HOST", and its PTTL, as a
 * holder in slot (-1: shared) of info. */
enum lr_status holder_add(struct lr_info *info, const redisReply *v,
			  const redisReply *pttl, long long slot,
			  struct lr_err *err)
{
	struct lr_holder *h;
	char tok[128];
	unsigned long long fence;
	long pid;
	long long since;
	int pos = 0;

	if (v->type != REDIS_REPLY_STRING || !v->len)
		return LR_OK;
	if (!(h = lr_info_add(info))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	h->shared = slot < 0;
	h->slot = slot > 0 ? (unsigned)slot : 0;
	if (pttl->type == REDIS_REPLY_INTEGER && pttl->integer >= 0)
		h->ttl_left_ms = pttl->integer;
	if (sscanf(v->str, "%127s %llu %ld %lld %n", tok, &fence, &pid, &since,
		   &pos) == 4 &&
	    pos > 0) {
		h->fence = fence;
		h->pid = pid;
		h->since_ms = since;
		snprintf(h->host, sizeof(h->host), "%s", v->str + pos);
	}
	return LR_OK;
}

static enum lr_status redis_inspect(struct lr_store *st, int64_t deadline,
				    struct lr_info *info, struct lr_err *err)
{
	const char *kv[6] = { st->lease_key,   st->holders,
			      st->limit_key,   st->waiters,
			      st->hold_prefix, st->slot_prefix };
	struct cmd cmds[1];
	const redisReply *r;
	enum lr_status s;
	size_t i;

	s = run_script(st, &inspect_lua, 4, 2, kv, cmds, 1, 0, deadline, err);
	if (s != LR_OK)
		return s;
	r = cmds[0].r;
	/* holders(), then the waiters (inspect.lua). */
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
	    r->elements % 3 != 1 || r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[r->elements - 1]->type != REDIS_REPLY_INTEGER) {
		lr_err_set(err, "redis at %s: inspect: unexpected reply",
			   st->where);
		s = LR_ERROR;
		goto out;
	}
	info->waiters = (long)r->element[r->elements - 1]->integer;
	info->limit = (unsigned)r->element[0]->integer;
	s = holder_add(info, r->element[1], r->element[2], 0, err);
	if (s == LR_OK && info->n)
		info->limit = 1;
	for (i = 3; s == LR_OK && i + 1 < r->elements; i += 3)
		s = holder_add(info, r->element[i], r->element[i + 1],
			       r->element[i + 2]->type == REDIS_REPLY_INTEGER
				       ? r->element[i + 2]->integer
				       : -1,
			       err);
out:
	cmds_free(cmds, 1);
	return s;
}

static enum lr_status redis_break(struct lr_store *st, int slot,
				  int64_t deadline, struct lr_err *err)
{
	char k[16];
	const char *kv[9] = { st->lease_key,   st->waiters,	st->holders,
			      st->limit_key,   k,		st->chan,
			      st->wake_prefix, st->hold_prefix, st->slot_prefix };
	struct cmd cmds[1];
	enum lr_status s;

	snprintf(k, sizeof(k), "%d", slot);
	s = run_script(st, &break_lua, 4, 5, kv, cmds, 1, 0, deadline, err);
	if (s == LR_OK)
		cmds_free(cmds, 1);
	return s;
}

static const char *const secret_env[] = { "REDISCLI_AUTH", NULL };

const struct lr_store_ops lr_store_ops = {
	.abi = LR_STORE_ABI,
	.name = "redis",
	.caps = LR_CAP_LIMIT | LR_CAP_SHARED,
	.secret_env = secret_env,
	.open = redis_open,
	.acquire = redis_acquire,
	.wait_fd = redis_wait_fd,
	.process = redis_process,
	.check = redis_check,
	.renew = redis_renew,
	.node = redis_node,
	.release = redis_release,
	.inspect = redis_inspect,
	.break_lease = redis_break,
	.close = redis_close,
	.run_start = redis_run_start,
	.run_end = redis_run_end,
	.run_last = redis_run_last,
	.list = redis_list,
};

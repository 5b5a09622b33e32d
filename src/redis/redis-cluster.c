/*
 * redis-cluster.c - Redis Cluster for the Redis store (module redis.so):
 * the nodes we know, the slot of a key, and what a node's MOVED or ASK
 * makes of a round trip.  See "Cluster" at the top of redis.c.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis-int.h"

/* The most nodes kept: the seeds and those learned since. */
#define MAX_NODES 64
/* The most redirections one round trip follows. */
#define MAX_HOPS 5
/* A connection opened for one ASK round trip: of no node (node_gen). */
#define GEN_NONE UINT_MAX

/* CRC16-CCITT (XModem), as Redis Cluster hashes keys. */
static unsigned crc16(const char *s, size_t n)
{
	unsigned crc = 0;
	size_t i;
	int b;

	for (i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)s[i] << 8;
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
	}
	return crc & 0xffff;
}

/* The slot of key: of its hash tag, the text between the first '{' and
 * the next '}' if that is not empty, else of the whole key. */
unsigned cluster_slot(const char *key)
{
	const char *o = strchr(key, '{'), *c = o ? strchr(o + 1, '}') : NULL;

	if (c && c > o + 1)
		return crc16(o + 1, (size_t)(c - o - 1)) & 16383;
	return crc16(key, strlen(key)) & 16383;
}

/* The index of host:port among the nodes, or -1. */
static int node_index(const struct lr_store *st, const char *host, int port)
{
	size_t i;

	for (i = 0; i < st->nnodes; i++)
		if (st->nodes[i].port == port &&
		    strcmp(st->nodes[i].host, host) == 0)
			return (int)i;
	return -1;
}

/* Adds host:port to the nodes we know (up to MAX_NODES); its index, or
 * -1 when it cannot be kept. */
static int node_learn(struct lr_store *st, const char *host, int port)
{
	struct lr_url_host *p;
	int i = node_index(st, host, port);

	if (i >= 0 || st->nnodes >= MAX_NODES || !*host || port < 1 ||
	    port > 65535)
		return i;
	p = realloc(st->nodes, (st->nnodes + 1) * sizeof(*p));
	if (!p)
		return -1;
	st->nodes = p;
	p[st->nnodes].host = strdup(host);
	if (!p[st->nnodes].host)
		return -1;
	p[st->nnodes].port = port;
	return (int)st->nnodes++;
}

/* Makes node i the data node. */
static void node_go(struct lr_store *st, size_t i)
{
	char *h = strdup(st->nodes[i].host);

	if (h)
		node_set(st, h, st->nodes[i].port);
}

/* The data node failed us: the next connect goes to the master of our
 * slot by the last map, if that is another node, else to the next node
 * we know.  Any node answers MOVED to the slot's master of the moment,
 * so a failover is ridden out (st->retry) wherever we land. */
void cluster_suspect(struct lr_store *st)
{
	int at = st->host ? node_index(st, st->host, st->port) : -1;

	st->retry = 1;
	if (!st->nnodes)
		return;
	if (st->map_owner >= 0 && st->map_owner != at)
		node_go(st, (size_t)st->map_owner);
	else
		node_go(st, (size_t)(at + 1) % st->nnodes);
	st->map_owner = -1; /* it failed us once: the map is stale */
}

/* Learns the nodes from r, the reply to CLUSTER SLOTS: {start, end,
 * {host, port, ...} of the master, then of each replica} per range;
 * notes the master of our slot.  A reply of another shape (an ACL that
 * forbids it) teaches nothing. */
void cluster_map_read(struct lr_store *st, const redisReply *r)
{
	unsigned slot = cluster_slot(st->lease_key);
	size_t i, j;

	if (r->type != REDIS_REPLY_ARRAY)
		return;
	for (i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		for (j = 2; j < e->elements; j++) {
			const redisReply *n = e->element[j];
			int k;

			if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 ||
			    n->element[0]->type != REDIS_REPLY_STRING ||
			    n->element[1]->type != REDIS_REPLY_INTEGER)
				continue;
			k = node_learn(st, *n->element[0]->str
						   ? n->element[0]->str
						   : st->host ? st->host : "",
				       (int)n->element[1]->integer);
			if (j == 2 && k >= 0 &&
			    e->element[0]->integer <= (long long)slot &&
			    slot <= (unsigned long long)e->element[1]->integer)
				st->map_owner = k;
		}
	}
}

/* Parses "MOVED 3999 host:port" (or ASK): 1 with *host (malloc()) and
 * *port, else 0.  An empty host is the node that answered. */
static int redirect_parse(const struct lr_store *st, const char *msg,
			  char **host, int *port)
{
	const char *sp = strchr(msg, ' '), *a = sp ? strchr(sp + 1, ' ') : NULL;
	const char *colon = a ? strrchr(a + 1, ':') : NULL;
	char *end;
	long p;

	if (!colon)
		return 0;
	p = strtol(colon + 1, &end, 10);
	if (*end || p < 1 || p > 65535)
		return 0;
	if (colon == a + 1)
		*host = strdup(st->host ? st->host : "");
	else
		*host = strndup(a + 1, (size_t)(colon - a - 1));
	*port = (int)p;
	return *host != NULL;
}

/* Looks at the n replies of a round trip for a node's redirection.
 * REDIRECT_NONE; REDIRECT_MOVED having made the node named the data node
 * (the map goes stale: the next renewal asks for it); REDIRECT_ASK with
 * the node to ask in st->ask_host, st->ask_port; or -1 with err filled:
 * a redis:// URL that reached a cluster node, or a bad redirection.  The
 * replies are freed unless REDIRECT_NONE. */
int cluster_redirect(struct lr_store *st, redisReply **r, int n,
		     struct lr_err *err)
{
	char *host = NULL;
	int i, port, ask;

	for (i = 0; i < n; i++)
		if (is_error(r[i], "MOVED ") || is_error(r[i], "ASK "))
			break;
	if (i == n)
		return REDIRECT_NONE;
	ask = is_error(r[i], "ASK ");
	if (!st->cluster) {
		lr_err_set(err, "redis at %s is a Redis Cluster node (it "
				"answered %s): use redis+cluster://",
			   st->where, ask ? "ASK" : "MOVED");
	} else if (!redirect_parse(st, r[i]->str, &host, &port)) {
		lr_err_set(err, "%s: a redirection to where? %.100s", st->who,
			   r[i]->str);
	} else if (ask) {
		free(st->ask_host);
		st->ask_host = host;
		st->ask_port = port;
	} else {
		node_learn(st, host, port);
		node_set(st, host, port);
		st->asked &= ~ASK_MAP;
	}
	replies_free(r, n);
	return host ? (ask ? REDIRECT_ASK : REDIRECT_MOVED) : -1;
}

/* Sends the n commands to the node an ASK named, each behind ASKING, on
 * a connection of its own, which then serves as the command connection
 * until the next round trip (WAIT after a script must go where the
 * script ran), belonging to no node: the next round trip goes back to
 * the slot's master, and the watch is not armed there.  On LR_OK the
 * replies are in cmds (the caller frees them, cmds_free()). */
static enum lr_status ask_trip(struct lr_store *st, struct cmd *cmds, int n,
			       int64_t deadline, const char *what,
			       struct lr_err *err)
{
	const char *asking[1] = { "ASKING" };
	redisReply *r[2 * MAX_CMDS];
	char *home = st->host ? strdup(st->host) : NULL;
	int port = st->port, i, got;
	struct conn *k = NULL;
	enum lr_status s;

	if (!home) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	node_set(st, st->ask_host, st->ask_port);
	st->ask_host = NULL;
	s = connect_to(st, deadline, &k, 1, NULL, 0, err);
	for (i = 0; s == LR_OK && i < n; i++) {
		conn_append(k, 1, asking);
		conn_append(k, cmds[i].argc, cmds[i].argv);
	}
	if (s == LR_OK)
		s = exchange(st, k, 2 * n, r, step_end(st, deadline), &got,
			     st->who, what, err);
	if (s == LR_OK)
		node_answered(st);
	node_set(st, home, port);
	if (s != LR_OK) {
		conn_free(k);
		return s;
	}
	for (i = 0; i < n; i++) {
		cmds[i].r = r[2 * i + 1];
		r[2 * i + 1] = NULL;
	}
	replies_free(r, 2 * n);
	drop_main(st);
	k->gen = GEN_NONE;
	st->c = k;
	return LR_OK;
}

/* After exchange() of round_trip() read the n replies r: follows a
 * redirection.  LR_OK with the replies in cmds (none, or ASK followed);
 * LR_BUSY when round_trip() must send the round trip again, to the node
 * a MOVED named; else a failure with err filled (nothing to free). */
enum lr_status cluster_follow(struct lr_store *st, struct cmd *cmds, int n,
			      redisReply **r, int *hops, int64_t deadline,
			      const char *what, struct lr_err *err)
{
	int rd = cluster_redirect(st, r, n, err), i;
	enum lr_status s;

	if (rd == REDIRECT_NONE) {
		for (i = 0; i < n; i++)
			cmds[i].r = r[i];
		return LR_OK;
	}
	if (rd < 0)
		return LR_ERROR;
	if (++*hops > MAX_HOPS) {
		lr_err_set(err, "%s: %s: redirected more than %d times (a "
				"slot is moving?)",
			   st->who, what, MAX_HOPS);
		lr_err_heals(err);
		st->retry = 1;
		return LR_ERROR;
	}
	if (rd == REDIRECT_MOVED)
		return LR_BUSY;
	s = ask_trip(st, cmds, n, deadline, what, err);
	if (s != LR_OK)
		return s;
	for (i = 0; i < n; i++)
		r[i] = cmds[i].r;
	/* Moved on since: the slot's master takes it (the next try). */
	if (cluster_redirect(st, r, n, err) == REDIRECT_NONE)
		return LR_OK;
	for (i = 0; i < n; i++)
		cmds[i].r = NULL;
	lr_err_set(err, "%s: %s: the slot moved while we asked", st->who,
		   what);
	lr_err_heals(err);
	st->retry = 1;
	return LR_ERROR;
}

/* Adds host:port to the n hosts of *out unless it is there: 0, or -1
 * out of memory. */
static int master_add(struct lr_url_host **out, size_t *n, const char *host,
		      int port)
{
	struct lr_url_host *p;
	size_t i;

	for (i = 0; i < *n; i++)
		if ((*out)[i].port == port && strcmp((*out)[i].host, host) == 0)
			return 0;
	p = realloc(*out, (*n + 1) * sizeof(*p));
	if (!p)
		return -1;
	*out = p;
	p[*n].host = strdup(host);
	if (!p[*n].host)
		return -1;
	p[*n].port = port;
	(*n)++;
	return 0;
}

/* The masters of r, the reply to CLUSTER SLOTS, each once, in the order
 * of their first range: into *out (free with lr_url_hosts_free()) and
 * *n.  An empty host is the node that answered.  Returns 0, or -1 with
 * err filled (a reply of another shape, out of memory). */
int cluster_masters(const struct lr_store *st, const redisReply *r,
		    struct lr_url_host **out, size_t *n, struct lr_err *err)
{
	size_t i;

	*out = NULL;
	*n = 0;
	for (i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		const redisReply *e = r->element[i], *m;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    (m = e->element[2])->type != REDIS_REPLY_ARRAY ||
		    m->elements < 2 ||
		    m->element[0]->type != REDIS_REPLY_STRING ||
		    m->element[1]->type != REDIS_REPLY_INTEGER ||
		    m->element[1]->integer < 1 || m->element[1]->integer > 65535)
			break;
		if (master_add(out, n, *m->element[0]->str ? m->element[0]->str
				: st->host ? st->host : "127.0.0.1",
			       (int)m->element[1]->integer) < 0) {
			lr_err_set(err, "out of memory");
			goto fail;
		}
	}
	if (r->type == REDIS_REPLY_ARRAY && i == r->elements)
		return 0;
	lr_err_set(err, "%s: CLUSTER SLOTS: %.200s", st->who,
		   r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
fail:
	lr_url_hosts_free(*out, *n);
	*out = NULL;
	*n = 0;
	return -1;
}

/*
 * list.c - leaserun --list (see list.h).
 *
 * The table has one line per holder, as lslocks(8) has one per lock:
 *
 *	NAME     MODE      HOLDER  PID   SINCE                AGE  TTL    FENCE WAITERS
 *	backup   exclusive web1    1234  2026-12-03T10:00:00Z 5m   6.2s   42    1
 *	report   slot 0/3  web2    77    2026-12-03T10:04:00Z 1m   -      43    0
 *
 * Every column but HOLDER is one word ("-" unknown; MODE's "slot K/N"
 * is two), so the line splits with awk; HOLDER's blanks become '_'.
 * WAITERS is the lease's, repeated on each of its holders' lines.  The
 * lines come as the store hands the leases over, a page at a time, so
 * the listing of a large store starts at once and needs no more memory
 * than a page.  A store hands each lease's holders in slot order.  --json prints the same lines as one array of objects,
 * one object a line.
 */
#include "config.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "list.h"
#include "stores.h"
#include "util.h"

struct listing {
	const struct lr_list_req *q;
	size_t lines;
	int64_t now;      /* wall-clock ms, for the ages */
};

/* "exclusive", "shared" or "slot K/N" ("slot K" when N is unknown). */
static void mode_word(const struct lr_info *info, const struct lr_holder *h,
		      char *buf, size_t len)
{
	if (h->shared)
		snprintf(buf, len, "shared");
	else if (info->limit > 1)
		snprintf(buf, len, "slot %u/%u", h->slot, info->limit);
	else if (h->slot)
		snprintf(buf, len, "slot %u", h->slot);
	else
		snprintf(buf, len, "exclusive");
}

/* A number as a word, or "-" when unknown. */
static void num_word(char *buf, size_t len, long long v, int known)
{
	if (known)
		snprintf(buf, len, "%lld", v);
	else
		snprintf(buf, len, "-");
}

static void header(void)
{
	printf("%-20s %-10s %-16s %-7s %-20s %-6s %-7s %-16s %s\n", "NAME",
	       "MODE", "HOLDER", "PID", "SINCE", "AGE", "TTL", "FENCE",
	       "WAITERS");
}

static void line_text(struct listing *l, const char *name,
		      const struct lr_info *info, const struct lr_holder *h)
{
	char mode[32], host[256], pid[24], since[32], age[32], ttl[32];
	char fence[24], waiters[24];
	size_t i;

	mode_word(info, h, mode, sizeof(mode));
	snprintf(host, sizeof(host), "%s", h->host[0] ? h->host : "-");
	for (i = 0; host[i]; i++)
		if (host[i] == ' ' || host[i] == '\t')
			host[i] = '_';
	num_word(pid, sizeof(pid), h->pid, h->pid != 0);
	snprintf(since, sizeof(since), "-");
	snprintf(age, sizeof(age), "-");
	if (h->since_ms) {
		lr_iso_time(since, sizeof(since), h->since_ms);
		lr_duration_human(l->now > h->since_ms ? l->now - h->since_ms
						       : 0,
				  age, sizeof(age));
	}
	snprintf(ttl, sizeof(ttl), "-");
	if (h->ttl_left_ms >= 0)
		lr_duration_human(h->ttl_left_ms, ttl, sizeof(ttl));
	num_word(fence, sizeof(fence), (long long)h->fence, h->fence != 0);
	num_word(waiters, sizeof(waiters), info->waiters, info->waiters >= 0);
	printf("%-20s %-10s %-16s %-7s %-20s %-6s %-7s %-16s %s\n", name, mode,
	       host, pid, since, age, ttl, fence, waiters);
}

static void line_json(struct listing *l, const char *name,
		      const struct lr_info *info, const struct lr_holder *h)
{
	char buf[8192], mode[32], since[32], next[sizeof(info->next)];
	struct lr_json j;

	snprintf(next, sizeof(next), "%s", info->next);
	lr_printable(next);
	mode_word(info, h, mode, sizeof(mode));
	lr_json_open(&j, buf, sizeof(buf));
	lr_json_str(&j, "name", name);
	lr_json_str(&j, "mode", h->shared ? "shared"
			: info->limit > 1 || h->slot ? "slot"
						      : "exclusive");
	lr_json_num(&j, "slot", h->slot, !h->shared);
	lr_json_num(&j, "limit", info->limit, info->limit != 0);
	lr_json_str(&j, "host", h->host[0] ? h->host : NULL);
	lr_json_num(&j, "pid", h->pid, h->pid != 0);
	if (h->since_ms)
		lr_iso_time(since, sizeof(since), h->since_ms);
	lr_json_str(&j, "since", h->since_ms ? since : NULL);
	lr_json_num(&j, "since_ms", h->since_ms, h->since_ms != 0);
	lr_json_num(&j, "age_ms", l->now - h->since_ms, h->since_ms != 0);
	lr_json_num(&j, "ttl_left_ms", h->ttl_left_ms, h->ttl_left_ms >= 0);
	lr_json_num(&j, "fence", (long long)h->fence, h->fence != 0);
	lr_json_num(&j, "waiters", info->waiters, info->waiters >= 0);
	lr_json_str(&j, "next", info->next[0] ? next : NULL);
	lr_json_close(&j);
	printf("%s%s", l->lines ? ",\n" : "[\n", buf);
}

/* list()'s callback: the lines of one lease, if it is held and its name
 * matches. */
static int one_lease(void *arg, const char *name, const struct lr_info *info)
{
	struct listing *l = arg;
	char printable[1024];
	size_t i;

	if (!info->n || fnmatch(l->q->pattern, name, 0) != 0)
		return 0;
	snprintf(printable, sizeof(printable), "%s", name);
	lr_printable(printable);
	if (!l->lines && !l->q->json)
		header();
	for (i = 0; i < info->n; i++) {
		struct lr_holder h = info->h[i];

		lr_printable(h.host);
		if (l->q->json)
			line_json(l, printable, info, &h);
		else
			line_text(l, printable, info, &h);
		l->lines++;
	}
	return ferror(stdout) ? -1 : 0;
}

int lr_list_show(const struct lr_list_req *q, char *why, size_t len)
{
	struct listing l = { q, 0, lr_wall_ms() };
	struct lr_err err = { "" };
	enum lr_status rc;

	if (!q->ops->list) {
		snprintf(why, len, "the %s store cannot list its leases",
			 q->ops->name);
		return -1;
	}
	rc = q->ops->list(q->st, q->pattern, one_lease, &l, q->deadline,
			  &err);
	/* The header (or "[") came with the first line; with none, it
	 * comes only if the store could be read. */
	if (q->json && (l.lines || rc == LR_OK))
		printf("%s]\n", l.lines ? "\n" : "[");
	else if (!l.lines && rc == LR_OK)
		header();
	if (fflush(stdout) != 0 || ferror(stdout)) {
		snprintf(why, len, "cannot write the listing");
		return -1;
	}
	if (rc != LR_OK) {
		char ubuf[LR_MSG_URL_MAX + 4];

		snprintf(why, len, "cannot list the leases of %s: %s",
			 lr_msg_url(q->url, ubuf, sizeof(ubuf)),
			 err.msg[0] ? err.msg : lr_status_name(rc));
		return -1;
	}
	return 0;
}

/*
 * status.c - leaserun --status (see status.h): the holders of a lease,
 * one line per field for a plain lease and one line per holder for a
 * semaphore or a shared lease, or one JSON object; then its last run.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "log.h"
#include "status.h"
#include "stores.h"
#include "util.h"

/* The last recorded run (--once-per), for --status.  A store that cannot
 * read it is a warning: who holds the lease is still worth showing. */
static void last_run(const struct lr_status_req *q, struct lr_run *run)
{
	struct lr_err err = { "" };
	enum lr_status rc;

	lr_run_init(run);
	if (!q->ops->run_last)
		return;
	rc = q->ops->run_last(q->st, lr_now_ms() + q->budget_ms, run, &err);
	if (rc != LR_OK) {
		lr_log(LR_LOG_WARN, "last-run", "cannot read the last run: %s",
		       err.msg[0] ? err.msg : lr_status_name(rc));
		lr_run_init(run);
	}
	lr_printable(run->host);
}

/* "when" as ISO 8601 into j, or null when unknown (0). */
static void json_time(struct lr_json *j, const char *key, int64_t ms)
{
	char when[32];

	if (!ms) {
		lr_json_null(j, key);
		return;
	}
	lr_iso_time(when, sizeof(when), ms);
	lr_json_str(j, key, when);
}

/* The last run as a JSON object (or null) into buf (len bytes: room for
 * 6 * the host's length + 512). */
static void run_json(char *buf, size_t len, const struct lr_run *run)
{
	struct lr_json j;

	if (!run->known) {
		snprintf(buf, len, "null");
		return;
	}
	lr_json_open(&j, buf, len);
	lr_json_str(&j, "host", run->host[0] ? run->host : NULL);
	lr_json_num(&j, "pid", run->pid, run->pid);
	lr_json_num(&j, "fence", (long long)run->fence, run->fence);
	json_time(&j, "started", run->start_ms);
	lr_json_num(&j, "started_ms", run->start_ms, run->start_ms);
	lr_json_num(&j, "ago_ms", run->ago_ms, run->ago_ms >= 0);
	json_time(&j, "ended", run->end_ms);
	lr_json_num(&j, "ended_ms", run->end_ms, run->end_ms);
	lr_json_num(&j, "status", run->status, run->end_ms && run->status >= 0);
	lr_json_num(&j, "period_ms", run->period_ms, run->period_ms);
	lr_json_num(&j, "next_in_ms", run->next_ms, run->next_ms >= 0);
	lr_json_close(&j);
}

/* Is the run of this fence one of the holders? */
static int holds_fence(const struct lr_info *info, uint64_t fence)
{
	size_t i;

	for (i = 0; i < info->n; i++)
		if (info->h[i].fence == fence)
			return 1;
	return 0;
}

/* The run lines of --status: when it started, how it ended, when the
 * next is allowed. */
static void run_text(const struct lr_info *info, const struct lr_run *run)
{
	char when[32], d[32];

	if (!run->known)
		return;
	printf("%-8s started", "run:");
	if (run->start_ms) {
		lr_iso_time(when, sizeof(when), run->start_ms);
		printf(" %s", when);
	}
	if (run->ago_ms >= 0) {
		lr_duration_human(run->ago_ms, d, sizeof(d));
		printf(run->start_ms ? " (%s ago)" : " %s ago", d);
	}
	if (run->host[0])
		printf(" on %s", run->host);
	if (run->pid)
		printf(" pid %ld", run->pid);
	if (run->fence)
		printf(", fence %" PRIu64, run->fence);
	putchar('\n');
	if (run->end_ms) {
		lr_iso_time(when, sizeof(when), run->end_ms);
		printf("%-8s %s", "ended:", when);
		if (run->status >= 0)
			printf(", status %d", run->status);
		putchar('\n');
	} else {
		printf("%-8s %s\n", "ended:",
		       holds_fence(info, run->fence) ? "not yet"
						     : "not recorded");
	}
	if (run->period_ms) {
		lr_duration_human(run->period_ms, d, sizeof(d));
		printf("%-8s %s", "period:", d);
		if (run->next_ms > 0) {
			lr_duration_human(run->next_ms, d, sizeof(d));
			printf(", next run allowed in %s", d);
		} else if (run->next_ms == 0) {
			printf(", next run allowed now");
		}
		putchar('\n');
	}
}

/* A holder's members, unknown ones null. */
static void holder_json(struct lr_json *j, const struct lr_holder *h)
{
	lr_json_str(j, "host", h && h->host[0] ? h->host : NULL);
	lr_json_num(j, "pid", h ? h->pid : 0, h && h->pid);
	json_time(j, "since", h ? h->since_ms : 0);
	lr_json_num(j, "since_ms", h ? h->since_ms : 0, h && h->since_ms);
	lr_json_num(j, "ttl_left_ms", h ? h->ttl_left_ms : 0,
		 h && h->ttl_left_ms >= 0);
}

/* One JSON object on one line; unknown fields are null.  The first holder
 * is also given at the top (host, pid, since, ttl_left_ms, fence), as
 * before there could be more than one; "holders" lists them all.  Returns
 * -1 when out of memory. */
static int status_json(const struct lr_status_req *q,
		       const struct lr_info *info, const struct lr_run *run)
{
	const struct lr_holder *h0 = info->n ? &info->h[0] : NULL;
	uint64_t fence = h0 ? h0->fence : info->fence;
	char *buf, *list, runbuf[2048];
	size_t len, at = 0, i;
	struct lr_json j;

	/* Every byte may grow sixfold when escaped (\u00XX). */
	len = 6 * (strlen(q->name) + strlen(q->url)) + 1024;
	for (i = 0; i < info->n; i++)
		len += 6 * strlen(info->h[i].host) + 256;
	if (h0)
		len += 6 * strlen(h0->host);
	len += sizeof(runbuf);
	buf = malloc(len);
	list = malloc(len);
	if (!buf || !list) {
		free(buf);
		free(list);
		return -1;
	}
	list[at++] = '[';
	for (i = 0; i < info->n; i++) {
		const struct lr_holder *h = &info->h[i];

		if (i)
			list[at++] = ',';
		lr_json_open(&j, list + at, len - at - 1);
		lr_json_uint(&j, "slot", h->slot);
		lr_json_bool(&j, "shared", h->shared);
		holder_json(&j, h);
		lr_json_num(&j, "fence", (long long)h->fence, h->fence);
		at += lr_json_close(&j);
	}
	list[at++] = ']';
	list[at] = '\0';
	run_json(runbuf, sizeof(runbuf), run);

	lr_json_open(&j, buf, len);
	lr_json_str(&j, "name", q->name);
	lr_json_str(&j, "store", q->ops->name);
	lr_json_str(&j, "url", q->url);
	lr_json_bool(&j, "held", h0 != NULL);
	holder_json(&j, h0);
	lr_json_num(&j, "fence", (long long)fence, fence);
	lr_json_num(&j, "limit", info->limit, info->limit);
	lr_json_num(&j, "waiters", info->waiters, info->waiters >= 0);
	lr_json_str(&j, "next", info->next[0] ? info->next : NULL);
	lr_json_raw(&j, "holders", list);
	lr_json_raw(&j, "last_run", runbuf);
	lr_json_close(&j);
	puts(buf);
	free(buf);
	free(list);
	return 0;
}

/* "web1 pid 12", "web1", "pid 12" or "unknown" into buf. */
static void holder_who(const struct lr_holder *h, char *buf, size_t len)
{
	lr_holder_who(h, buf, len);
	if (!buf[0])
		snprintf(buf, len, "unknown");
}

/* The plain lease's holder, a line per field, as --status always
 * showed it. */
static void status_one(const struct lr_holder *h)
{
	char when[32], who[300];

	holder_who(h, who, sizeof(who));
	if (h->host[0] || h->pid)
		printf("%-8s %s\n", "holder:", who);
	if (h->since_ms) {
		lr_iso_time(when, sizeof(when), h->since_ms);
		printf("%-8s %s (%llds ago)\n", "since:", when,
		       (long long)((lr_wall_ms() - h->since_ms) / 1000));
	}
	if (h->ttl_left_ms >= 0)
		printf("%-8s %lldms left\n", "ttl:", (long long)h->ttl_left_ms);
	else
		printf("%-8s none (held while the holder lives)\n", "ttl:");
	if (h->fence)
		printf("%-8s %" PRIu64 "\n", "fence:", h->fence);
}

/* One line per holder of a semaphore or a shared lease: "slot 2:  web1
 * pid 12, since ... (5s ago), 800ms left, fence 7". */
static void status_many(const struct lr_info *info)
{
	char when[32], who[300], label[32];
	size_t i;

	for (i = 0; i < info->n; i++) {
		const struct lr_holder *h = &info->h[i];

		if (h->shared)
			snprintf(label, sizeof(label), "shared:");
		else
			snprintf(label, sizeof(label), "slot %u:", h->slot);
		holder_who(h, who, sizeof(who));
		printf("%-8s %s", label, who);
		if (h->since_ms) {
			lr_iso_time(when, sizeof(when), h->since_ms);
			printf(", since %s (%llds ago)", when,
			       (long long)((lr_wall_ms() - h->since_ms) /
					   1000));
		}
		if (h->ttl_left_ms >= 0)
			printf(", %lldms left", (long long)h->ttl_left_ms);
		if (h->fence)
			printf(", fence %" PRIu64, h->fence);
		putchar('\n');
	}
}

/* "waiters: 2 (first: web3 pid 9)", when the store can tell. */
static void waiters_text(const struct lr_info *info)
{
	if (info->waiters < 0)
		return;
	printf("%-8s %ld", "waiters:", info->waiters);
	if (info->waiters > 0 && info->next[0])
		printf(" (first: %s)", info->next);
	putchar('\n');
}

int lr_status_show(const struct lr_status_req *q, char *why, size_t len)
{
	struct lr_run run;
	struct lr_info info;
	struct lr_err err = { "" };
	enum lr_status rc;
	size_t i, shared = 0;

	lr_info_init(&info);
	rc = q->ops->inspect(q->st, lr_now_ms() + q->budget_ms, &info, &err);
	if (rc != LR_OK) {
		char ubuf[LR_MSG_URL_MAX + 4];

		lr_info_free(&info);
		snprintf(why, len, "cannot inspect %s on %s: %s", q->name,
			 lr_msg_url(q->url, ubuf, sizeof(ubuf)),
			 err.msg[0] ? err.msg : lr_status_name(rc));
		return -1;
	}
	lr_info_sort(&info);
	lr_printable(info.next);
	for (i = 0; i < info.n; i++) {
		lr_printable(info.h[i].host);
		shared += info.h[i].shared != 0;
	}
	last_run(q, &run);
	if (q->json) {
		if (status_json(q, &info, &run) < 0) {
			lr_info_free(&info);
			snprintf(why, len, "out of memory");
			return -1;
		}
	} else {
		printf("%-8s %s\n%-8s %s\n", "name:", q->name, "store:",
		       q->url);
		if (!info.n)
			printf("%-8s free\n", "state:");
		else if (shared)
			printf("%-8s held, shared by %zu\n", "state:", shared);
		else if (info.limit > 1)
			printf("%-8s held, %zu of %u slots\n", "state:", info.n,
			       info.limit);
		else
			printf("%-8s held\n", "state:");
		if (info.limit > 1)
			printf("%-8s %u\n", "limit:", info.limit);
		waiters_text(&info);
		if (info.n == 1 && !shared && info.limit <= 1)
			status_one(&info.h[0]);
		else
			status_many(&info);
		if (!info.n && info.fence)
			printf("%-8s %" PRIu64 " (last granted)\n", "fence:",
			       info.fence);
		run_text(&info, &run);
	}
	shared = info.n; /* held or not, once the list is gone */
	lr_info_free(&info);
	return shared ? 0 : 1;
}

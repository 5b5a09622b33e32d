/*
 * report.c - one lifecycle event to the log, the state file, systemd and
 * the metrics, in that order (see report.h for why).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "store/store.h"
#include "store/duration.h"
#include "exit.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "report.h"
#include "state.h"
#include "timing.h"
#include "util.h"

/* The "acquired" line: the fence, the slot of a semaphore or the mode
 * of a shared lease, and the server that granted it where the store
 * names it (a cluster's master: which one is down to the name). */
static void say_acquired(const struct lr_reporter *r,
			 const struct lr_report *ev)
{
	struct lr_field f[] = {
		LR_NUM("fence", ev->fence),
		LR_NUM("wait_ms", ev->ms),
		LR_NUM("ttl_ms", ev->ttl),
		LR_NUM("slot", ev->slot),
		LR_STR("mode", r->shared ? "shared" : "exclusive"),
		LR_STR("node", ""),
	};
	int nf = r->limit > 1 ? 4 : r->shared ? 5 : 3;
	char on[320] = "";

	if (ev->node && *ev->node) {
		f[nf++] = LR_STR("node", ev->node);
		snprintf(on, sizeof(on), " on %s", ev->node);
	}
	if (r->limit > 1)
		lr_logf(LR_LOG_INFO, "acquired", f, nf,
			"acquired slot %u of %u, fence %llu%s", ev->slot,
			r->limit, (unsigned long long)ev->fence, on);
	else if (r->shared)
		lr_logf(LR_LOG_INFO, "acquired", f, nf,
			"acquired shared, fence %llu%s",
			(unsigned long long)ev->fence, on);
	else
		lr_logf(LR_LOG_INFO, "acquired", f, nf,
			"acquired, fence %llu%s", (unsigned long long)ev->fence,
			on);
}

static void say_slow(const struct lr_report *ev)
{
	int64_t safe = lr_safe_ttl(ev->ms);
	char buf[32];
	const struct lr_field f[] = {
		LR_NUM("p99_ms", ev->ms),
		LR_NUM("renewals", ev->n),
		LR_NUM("ttl_ms", ev->ttl),
		LR_NUM("safe_ttl_ms", safe),
	};

	lr_duration_format(safe, buf, sizeof(buf));
	lr_logf(LR_LOG_WARN, "slow-heartbeat", f, 4,
		"renewals are slow: p99 %lldms over the last %u renewals, "
		"more than a tenth of the TTL of %lldms; a TTL of %s or more "
		"would be safe",
		(long long)ev->ms, (unsigned)ev->n, (long long)ev->ttl, buf);
}

static void say_exited(const struct lr_report *ev)
{
	int ws = (int)ev->n;
	const struct lr_field f[] = {
		LR_STR("how", WIFSIGNALED(ws) ? "signal" : "exit"),
		LR_NUM("status", WIFSIGNALED(ws) ? WTERMSIG(ws)
						 : WEXITSTATUS(ws)),
	};

	lr_logf(LR_LOG_INFO, "exited", f, 2,
		WIFSIGNALED(ws) ? "command killed by signal %d"
				: "command exited with status %d",
		WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
}

/* The lines of the wait, up to the command's start. */
static void say_before(const struct lr_reporter *r,
		       const struct lr_report *ev)
{
	const struct lr_field ms[] = { LR_NUM("splay_ms", ev->ms) };
	const struct lr_field who[] = { LR_STR("holder", ev->why) };
	const struct lr_field period[] = { LR_NUM("period_ms", ev->ms) };
	const struct lr_field pid[] = { LR_NUM("pid", ev->n) };
	const struct lr_field why[] = { LR_STR("reason",
					       ev->why ? ev->why : "") };
	char took[32];

	switch (ev->kind) {
	case LR_REP_SPLAY:
		lr_logf(LR_LOG_INFO, "splay", ms, 1,
			"waiting %lldms (--splay) before the first attempt",
			(long long)ev->ms);
		return;
	case LR_REP_WAITING:
		if (ev->again)
			lr_duration_human(ev->ms, took, sizeof(took));
		if (ev->again == 1)
			lr_logf(LR_LOG_INFO, "waiting", who, 1,
				"held by %s now; still waiting (%s so far)",
				ev->why, took);
		else if (ev->again)
			lr_logf(LR_LOG_INFO, "waiting", who, 1,
				"still held by %s; waiting (%s so far)",
				ev->why[0] ? ev->why : "another", took);
		else
			lr_logf(LR_LOG_INFO, "waiting", who, 1,
				"held by %s; waiting",
				ev->why[0] ? ev->why : "another");
		return;
	case LR_REP_FAULT:
		lr_logf(LR_LOG_INFO, "store-fault", why, 1,
			"%s; trying again until the wait runs out", ev->why);
		return;
	case LR_REP_HEALED:
		lr_log(LR_LOG_INFO, "store-back", "the store answers again");
		return;
	case LR_REP_TTL:
		lr_log(LR_LOG_INFO, "ttl",
		       "the store granted a TTL of %lldms; renewing every "
		       "%lldms",
		       (long long)ev->ms, ev->n);
		return;
	case LR_REP_TOO_LATE:
		lr_log(LR_LOG_INFO, "retry",
		       "acquired with only %lldms left; giving it back and "
		       "trying again",
		       (long long)ev->left_ms);
		return;
	case LR_REP_ACQUIRED:
		say_acquired(r, ev);
		return;
	case LR_REP_RECORDED:
		lr_duration_human(ev->ms, took, sizeof(took));
		lr_logf(LR_LOG_INFO, "recorded", period, 1,
			"start recorded; the next run is allowed in %s", took);
		return;
	case LR_REP_LOST_EARLY:
		lr_logf(LR_LOG_WARN, "lost", why, 1,
			"lease lost before the command started: %s; %s",
			ev->why, ev->again ? "trying again" : "not running it");
		return;
	case LR_REP_STARTED:
		lr_logf(LR_LOG_INFO, "started", pid, 1,
			"command started, pid %ld", (long)ev->n);
		return;
	case LR_REP_NO_GUARD:
		lr_log(LR_LOG_WARN, "guard",
		       "cannot start the group guard (%s): kill -9 of "
		       "leaserun would leave the command's children running",
		       strerror((int)ev->n));
		return;
	default:
		return;
	}
}

/* The lines of the hold: renewals, and what stops the command. */
static void say_holding(const struct lr_report *ev)
{
	const struct lr_field lat[] = {
		LR_NUM("latency_ms", ev->ms),
		LR_NUM("left_ms", ev->left_ms),
		LR_STR("error", ev->why ? ev->why : ""),
	};
	const int known = ev->node && *ev->node;
	const struct lr_field ren[] = {
		LR_NUM("latency_ms", ev->ms),
		LR_NUM("left_ms", ev->left_ms),
		LR_STR("node", known ? ev->node : ""),
	};
	const struct lr_field sig[] = {
		LR_NUM("left_ms", ev->left_ms),
		LR_NUM("signal", ev->n),
	};
	const struct lr_field max[] = {
		LR_NUM("max_time_ms", ev->ms),
		LR_NUM("signal", ev->n),
	};
	char took[32];

	switch (ev->kind) {
	case LR_REP_RENEWED:
		/* The server only when it changed: a failover, a moved
		 * slot. */
		lr_logf(LR_LOG_INFO, "renewed", ren, known ? 3 : 2,
			"renewed%s in %lldms, %lldms left%s%s",
			ev->again ? " again" : "", (long long)ev->ms,
			(long long)ev->left_ms, ev->moved ? "; now on " : "",
			ev->moved ? ev->node : "");
		return;
	case LR_REP_RENEW_FAILED:
		lr_logf(LR_LOG_WARN, "renew-failed", lat, 3,
			"renew failed (%s); %lldms left", ev->why,
			(long long)ev->left_ms);
		return;
	case LR_REP_AT_RISK:
		if (ev->n)
			lr_logf(LR_LOG_WARN, "at-risk", sig, 1,
				"lease at risk: %lldms left; sending signal "
				"%d to the command",
				(long long)ev->left_ms, (int)ev->n);
		else
			lr_logf(LR_LOG_WARN, "at-risk", sig, 1,
				"lease at risk: %lldms left",
				(long long)ev->left_ms);
		return;
	case LR_REP_SLOW:
		say_slow(ev);
		return;
	case LR_REP_STOPPING:
		lr_logf(LR_LOG_WARN, "stopping", sig, 2,
			"cannot renew: %lldms left; sending signal %d to the "
			"command",
			(long long)ev->left_ms, (int)ev->n);
		return;
	case LR_REP_TIMED_OUT:
		lr_duration_human(ev->ms, took, sizeof(took));
		lr_logf(LR_LOG_WARN, "timed-out", max, 2,
			"the command ran for %s (--max-time); sending signal "
			"%d",
			took, (int)ev->n);
		return;
	default:
		return;
	}
}

/* The lines of the end: the command's, then the lease's. */
static void say_after(const struct lr_report *ev)
{
	const struct lr_field why[] = { LR_STR("reason",
					       ev->why ? ev->why : "") };
	const struct lr_field held[] = { LR_NUM("held_ms", ev->ms) };

	switch (ev->kind) {
	case LR_REP_LOST:
		lr_logf(LR_LOG_WARN, "lost", why, 1,
			"lease lost: %s; killing the command", ev->why);
		return;
	case LR_REP_EXITED:
		say_exited(ev);
		return;
	case LR_REP_DRAINING:
		lr_log(LR_LOG_INFO, "draining",
		       "command exited; stopping what is left of its process "
		       "group");
		return;
	case LR_REP_RUN_END_FAILED:
		lr_log(LR_LOG_WARN, "run-end",
		       "could not record the end of the run: %s", ev->why);
		return;
	case LR_REP_RELEASED:
		lr_logf(LR_LOG_INFO, "released", held, 1, "released");
		return;
	case LR_REP_FOUND_LOST:
		lr_logf(LR_LOG_WARN, "lost", why, 1,
			"the release found the lease lost: %s", ev->why);
		return;
	case LR_REP_RELEASE_FAILED:
		lr_log(LR_LOG_WARN, "release-failed", "could not release: %s",
		       ev->why);
		return;
	case LR_REP_NOT_RELEASED:
		if (ev->why)
			lr_log(LR_LOG_WARN, "not-released", "%s", ev->why);
		return;
	default:
		return;
	}
}

/* The event's own line, if it has one; the groups as in report.h. */
static void say(const struct lr_reporter *r, const struct lr_report *ev)
{
	if (ev->kind <= LR_REP_NO_GUARD)
		say_before(r, ev);
	else if (ev->kind <= LR_REP_TIMED_OUT)
		say_holding(ev);
	else
		say_after(ev);
}

/* The state an event leaves the lease in, for the command; -1: none. */
static int lease_state(const struct lr_report *ev)
{
	switch (ev->kind) {
	case LR_REP_HOLDING:
		return LR_ST_HELD;
	case LR_REP_RENEWED:
		return ev->stopping ? LR_ST_STOPPING : LR_ST_HELD;
	case LR_REP_AT_RISK:
		return LR_ST_AT_RISK;
	case LR_REP_STOPPING:
	case LR_REP_TIMED_OUT:
	case LR_REP_DRAINING:
		return LR_ST_STOPPING;
	case LR_REP_RELEASING:
		return LR_ST_RELEASING;
	case LR_REP_LOST:
	case LR_REP_FOUND_LOST:
		return LR_ST_LOST;
	default:
		return -1;
	}
}

/* Rewrites the command's state file; warns once if it cannot.  A file
 * that cannot be updated any more stays as it was: its deadline makes
 * --check say "expired" once that passes, which is the truth or late
 * news, never a lie about a lease we lost. */
static void keep_state(struct lr_reporter *r, const struct lr_report *ev)
{
	int st = lease_state(ev);

	/* A lease gone before the command started: the command that the
	 * file was for never runs. */
	if (ev->kind == LR_REP_END || ev->kind == LR_REP_LOST_EARLY) {
		lr_state_remove();
		return;
	}
	/* Only the start of the command makes the file. */
	if (st < 0 || r->state_failed ||
	    (ev->kind != LR_REP_HOLDING && !lr_state_path()))
		return;
	if (lr_state_write(r->name, (enum lr_lease_state)st, ev->fence,
			   ev->deadline) == 0)
		return;
	r->state_failed = 1;
	if (lr_state_path())
		lr_log(LR_LOG_WARN, "state",
		       "cannot update the lease state file (%s); leaserun "
		       "--check will report the lease expired from %lldms on",
		       strerror(errno),
		       (long long)(ev->deadline - lr_now_ms()));
	else
		lr_log(LR_LOG_WARN, "state",
		       "cannot write the lease state file (%s); the command "
		       "runs without LEASERUN_STATE",
		       strerror(errno));
}

static void tell(const struct lr_reporter *r, const struct lr_report *ev)
{
	const char *who = ev->why && ev->why[0] ? ev->why : "another";
	unsigned long long fence = ev->fence;
	char took[32];

	switch (ev->kind) {
	case LR_REP_SPLAY:
		lr_notify("STATUS=waiting %lldms (--splay) before taking %s",
			  (long long)ev->ms, r->name);
		return;
	case LR_REP_WAITING:
		lr_notify("STATUS=waiting for %s, held by %s", r->name, who);
		return;
	case LR_REP_STARTED:
		lr_notify("READY=1\nSTATUS=holding %s, fence %llu", r->name,
			  fence);
		return;
	case LR_REP_RENEWED:
		if (ev->again)
			lr_notify("STATUS=holding %s, fence %llu", r->name,
				  fence);
		return;
	case LR_REP_AT_RISK:
		lr_notify("STATUS=%s at risk: renewals failing, %lldms left",
			  r->name, (long long)ev->left_ms);
		return;
	case LR_REP_STOPPING:
		lr_notify("STATUS=stopping the command: %s could not be "
			  "renewed",
			  r->name);
		return;
	case LR_REP_TIMED_OUT:
		lr_duration_human(ev->ms, took, sizeof(took));
		lr_notify("STATUS=stopping the command: it ran for %s "
			  "(--max-time)",
			  took);
		return;
	case LR_REP_LOST:
		lr_notify("STATUS=lost %s: %s; the command was killed",
			  r->name, ev->why);
		return;
	case LR_REP_RELEASED:
		lr_notify("STOPPING=1\nSTATUS=released %s", r->name);
		return;
	case LR_REP_FOUND_LOST:
		lr_notify("STOPPING=1\nSTATUS=lost %s: %s", r->name, ev->why);
		return;
	case LR_REP_RELEASE_FAILED:
		lr_notify("STOPPING=1\nSTATUS=could not release %s", r->name);
		return;
	case LR_REP_NOT_RELEASED:
		lr_notify("STOPPING=1\nSTATUS=lost %s", r->name);
		return;
	default:
		return;
	}
}

/* The counter an event adds one to; -1: none. */
static int counter(const struct lr_report *ev)
{
	switch (ev->kind) {
	case LR_REP_CONFLICT:
		return LR_M_CONFLICTS;
	case LR_REP_ACQUIRED:
		return LR_M_ACQUIRED;
	case LR_REP_HELD_BACK:
		return LR_M_SKIPPED;
	case LR_REP_RENEW_FAILED:
		return LR_M_RENEW_FAILURES;
	case LR_REP_SLOW:
		return LR_M_HEARTBEAT_SLOW;
	case LR_REP_GONE: /* the group is gone: lost, timed out or done */
		if (ev->n == LR_OUT_LOST)
			return LR_M_LOST;
		return ev->n == LR_OUT_TIMEOUT ? LR_M_TIMEOUTS : -1;
	case LR_REP_FOUND_LOST:
		return ev->lost ? LR_M_LOST : -1;
	case LR_REP_LOST_EARLY:
		return LR_M_LOST;
	default:
		return -1;
	}
}

/* The histogram that an event's ms go into; -1: none. */
static int histogram(const struct lr_report *ev)
{
	switch (ev->kind) {
	case LR_REP_CONFLICT:
	case LR_REP_ACQUIRED:
		return LR_H_WAIT;
	case LR_REP_RENEWED:
		return LR_H_HEARTBEAT;
	case LR_REP_HOLD_OVER:
		return LR_H_HOLD;
	default:
		return -1;
	}
}

static void count(const struct lr_report *ev)
{
	int c = counter(ev), h = histogram(ev);

	if (c >= 0)
		lr_metrics_count((enum lr_counter)c);
	if (h >= 0)
		lr_metrics_observe((enum lr_histogram)h, ev->ms);
}

void lr_report(struct lr_reporter *r, const struct lr_report *ev)
{
	say(r, ev);
	keep_state(r, ev);
	tell(r, ev);
	count(ev);
}

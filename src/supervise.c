/*
 * supervise.c - the one event loop.
 *
 * One blocking point: poll() over the signalfd, a CLOCK_BOOTTIME timerfd
 * armed at the nearest deadline, and the store's fd.  Every wake-up first
 * fires the deadlines that have passed (the kill deadline first), then
 * handles what became readable, so a process resumed after SIGSTOP acts on
 * the clock before it believes anything else.
 *
 * States and events:
 *
 *   WAITING   acquire until OK (-> HELD, the command starts), busy with -n
 *             or past -w (conflict), or an error (fail).
 *   HELD      renew every R; a failure -> AT_RISK.
 *   AT_RISK   retry with jitter (about R/3) until D; OK -> HELD.
 *   STOPPING  the stop signal went to the group at D - grace; SIGKILL at
 *             D - kappa; renewals go on while it shuts down.
 *   LOST      certain loss (or D - kappa reached): the group was SIGKILLed
 *             at once; wait for it to be gone.  Exit 124.
 *   DRAINING  the command exited but its group has not: stop the rest
 *             (signal, then SIGKILL after the grace), keep renewing.
 *   DONE      the group is gone: release (unless lost) and return.
 *   SPLAYING  --splay: a random wait before the first attempt (-> WAITING
 *             when it is over); signals are handled as while waiting.
 *   TIMED_OUT --max-time ran out: the stop signal went to the group, and
 *             SIGKILL follows after the grace; renewals go on while it
 *             shuts down.  Exit 124.
 *
 * Timing (leaserun(1), "Timing"): all times are CLOCK_BOOTTIME ms.  A
 * renew or acquire that succeeds moves the deadline to
 * D = t_send + TTL*(1-rho) - epsilon, where t_send was taken just before
 * the request went out; failures and late replies never move it.  A store call's own deadline is never later
 * than the next stop deadline, so a hung store cannot delay a stop.
 *
 * --max-time counts from the command's start, on the same clock: at
 * start + max-time the stop signal, at that plus the grace SIGKILL, like
 * timeout(1) with -k.  --splay counts before the first attempt and not
 * against -w, which starts when the splay ends.  --once-per asks the
 * store to record the start, by its own clock, after the acquire and its
 * validity check and before the command starts: the lease serialises the
 * hosts, and the store's clock, not ours, tells whether a period passed.
 *
 * The transitions act (spawn, signal, release) and say what happened, once,
 * with report(): report.c words it for the log, the command's state file,
 * systemd and the metrics, always in that order.  What the loop does to
 * the command is placed around the report, so that the state file is
 * written before the command starts and before any signal that asks it
 * to look (--warn-signal, the stop signal), and removed only after the
 * release.  Only the -vv trace of the machine (state changes, forwarded
 * signals) is logged here directly.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "log.h"
#include "report.h"
#include "state.h"
#include "stores.h"
#include "supervise.h"
#include "timing.h"
#include "store/waitset.h"

enum state { WAITING, HELD, AT_RISK, STOPPING, LOST, DRAINING, DONE,
	     SPLAYING, TIMED_OUT };
enum event {
	EV_ACQUIRE,   /* time to try acquire (again) */
	EV_WAIT_OVER, /* -w ran out */
	EV_RENEW,     /* time to renew */
	EV_GRACE,     /* D - grace reached */
	EV_KILL,      /* D - kappa reached */
	EV_DRAIN_KILL, /* leftover group members had their grace */
	EV_STORE,     /* the store's fd is ready */
	EV_SIGNAL,    /* a signal to forward (or to die of while waiting) */
	EV_CHILD,     /* SIGCHLD: reap */
	EV_MAX_TIME,  /* --max-time reached */
	EV_MAX_KILL,  /* --max-time's grace passed */
};

static const char *const state_names[] = { "waiting", "held", "at-risk",
	"stopping", "lost", "draining", "done", "splaying", "timed-out" };

struct sup {
	const struct lr_sup_cfg *cfg;
	struct lr_sup_result *res;
	enum state state;
	int64_t ttl;           /* effective TTL */
	int64_t renew_ms;      /* R, scaled if the store granted another TTL */
	int64_t grace_ms;
	int64_t lease_deadline;             /* the lease deadline */
	int64_t t_acquire;     /* next acquire attempt */
	int64_t t_wait_over;   /* -w deadline */
	int64_t t_renew;       /* next renew */
	int64_t t_grace, t_kill, t_drain_kill;
	int64_t backoff;       /* acquire retry interval */
	int64_t t_start;       /* for the wait time */
	int64_t t_acquired;    /* for the hold time; 0 before */
	int waiting_logged;
	int64_t t_who;         /* waiting, with who_holds: next look */
	int64_t t_said;        /* ... and when the last "waiting" line went */
	struct lr_reporter rep; /* what the events of this run share */
	int too_late;          /* acquires in a row answered too late */
	int give_back;         /* a give-back before a retry did not finish */
	pid_t pid;             /* the command, 0 before / after */
	int reaped;            /* the command's status is in res */
	int stopped;           /* we stopped it: the outcome is 124 */
	int certain_loss;      /* do not release */
	int outlived;          /* the group outlived SIGKILL at the end */
	int signo;             /* EV_SIGNAL: which */
	int sicode;            /* EV_SIGNAL: who sent it (SI_KERNEL: tty) */
	short revents;         /* EV_STORE: what */
	unsigned seed;
	struct lr_p99 lat;     /* renew round trips */
	int slow_warned;       /* the slow-heartbeat warning went out */
	int64_t t_max;         /* --max-time: stop the command */
	int64_t t_max_kill;    /* ... and SIGKILL its group */
	int timed_out;         /* --max-time stopped it: the outcome is 124 */
	int run_started;       /* --once-per: the store recorded our start */
	uint64_t run_fence;    /* ... with this fence */
	int erring;            /* the last acquire failed with a fault that
				* may heal: the wait's end is a failure */
	struct lr_err last_err; /* ... that fault */
	char said[LR_ERRLEN];  /* the fault last logged, "" none */
	char node[300];        /* the server the store last named, "" none */
};

static int64_t jitter(struct sup *s, int64_t base)
{
	/* base * [0.75, 1.25) */
	return base * 3 / 4 + (int64_t)(rand_r(&s->seed) % (base / 2 + 1));
}

static void set_state(struct sup *s, enum state st)
{
	lr_log(LR_LOG_DEBUG, "state", "%s -> %s", state_names[s->state],
	       state_names[st]);
	s->state = st;
}

/* Moves D after a success whose request left at t_send. */
static void extend(struct sup *s, int64_t t_send)
{
	int64_t d = lr_deadline(t_send, s->ttl);

	if (d > s->lease_deadline)
		s->lease_deadline = d;
	s->t_renew = t_send + s->renew_ms;
	if (s->state != STOPPING) {
		s->t_grace = s->lease_deadline - s->grace_ms;
		s->t_kill = s->lease_deadline - LR_KAPPA_MS;
	}
}

/* The deadline for a store call made now: never past the next stop. */
static int64_t call_deadline(struct sup *s, int64_t now, int64_t cap)
{
	int64_t d = now + cap;

	if (s->t_grace < d)
		d = s->t_grace;
	if (s->t_kill < d)
		d = s->t_kill;
	if (s->t_drain_kill < d)
		d = s->t_drain_kill;
	if (s->t_max < d)
		d = s->t_max;
	if (s->t_max_kill < d)
		d = s->t_max_kill;
	return d > now ? d : now;
}

/* Tells the log, the state file, systemd and the metrics what happened
 * (report.h); the lease's fence and deadline go with every event. */
static void report(struct sup *s, struct lr_report ev)
{
	ev.fence = s->res->fence;
	ev.deadline = s->lease_deadline;
	lr_report(&s->rep, &ev);
}

/* Why a store call failed: in its own words, or else by its status. */
static const char *failed(const struct lr_err *err, enum lr_status rc)
{
	return err->msg[0] ? err->msg : lr_status_name(rc);
}

/* "host pid N", as far as the store knows; "" if it does not.  Of
 * several holders, the first and how many more: "host pid N and 2
 * more". */
static void holder(struct sup *s, int64_t now, char *buf, size_t len)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_info info;
	struct lr_err err = { "" };
	int64_t deadline = now + 1000;

	buf[0] = '\0';
	if (!c->ops->inspect)
		return;
	/* A courtesy: never worth outliving -w for. */
	if (s->t_wait_over < deadline)
		deadline = s->t_wait_over > now ? s->t_wait_over : now;
	lr_info_init(&info);
	if (c->ops->inspect(c->st, deadline, &info, &err) != LR_OK ||
	    !info.n)
		goto out;
	lr_info_sort(&info);
	lr_holders_who(&info, buf, len);
	lr_printable(buf);
out:
	lr_info_free(&info);
}

static void conflict(struct sup *s)
{
	s->res->outcome = LR_OUT_CONFLICT;
	report(s, (struct lr_report){ .kind = LR_REP_CONFLICT,
				      .ms = lr_now_ms() - s->t_start });
	set_state(s, DONE);
}

static void kill_group(struct sup *s, int sig)
{
	if (s->pid > 0)
		lr_child_signal(s->pid, s->cfg->foreground, sig);
}

static void lose(struct sup *s, const char *why)
{
	/* The kill first: the command has nothing to learn any more. */
	s->stopped = 1;
	kill_group(s, SIGKILL);
	report(s, (struct lr_report){ .kind = LR_REP_LOST, .why = why });
	set_state(s, LOST);
	s->t_renew = s->t_grace = s->t_kill = s->t_drain_kill = LR_MS_NEVER;
}

static void fail(struct sup *s, const struct lr_err *err)
{
	s->res->outcome = LR_OUT_FAILED;
	s->res->err = *err;
	set_state(s, DONE);
}

/* The store granted another TTL than asked (ZooKeeper negotiates its
 * session timeout): scale R and the grace with it, and fail if the result
 * cannot keep the timing rules.  Returns 0 after failing. */
static int granted(struct sup *s, const struct lr_grant *g)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	const char *why;

	s->ttl = g->ttl_ms;
	s->renew_ms = c->renew_ms * g->ttl_ms / c->ttl_ms;
	s->grace_ms = c->grace_ms * g->ttl_ms / c->ttl_ms;
	why = lr_timing_check(s->ttl, s->renew_ms, s->grace_ms);
	if (why) {
		lr_err_set(&err, "the store granted a TTL of %lldms instead "
				 "of %lldms, and with it %s",
			   (long long)g->ttl_ms, (long long)c->ttl_ms, why);
		fail(s, &err);
		return 0;
	}
	report(s, (struct lr_report){ .kind = LR_REP_TTL, .ms = s->ttl,
				      .n = s->renew_ms });
	return 1;
}

/* Gives the lease back before the run tries again.  One that no server
 * answered in time is made again before the next try (try_acquire()): a
 * store that still holds would hand back the same grant, whose fence is
 * not above the last one. */
static void give_back(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err ignored = { "" };
	enum lr_status rc = c->ops->release(c->st, now + 1000, &ignored);

	s->give_back = rc != LR_OK && rc != LR_LOST;
}

/* --once-per: has the store recorded our start?  Asked after the acquire
 * and its validity check, so the lease serialises the hosts, and before
 * the command starts, so a run counts from here whatever happens next.
 * The store's deadline leaves the validity the check asked for.  Returns
 * 1 when the command does not start now (held back, the store could
 * not record it, or is to be asked again), with the lease given back. */
static int ride_out(struct sup *s, int64_t now, const struct lr_err *err);

static int run_gate(struct sup *s, const struct lr_grant *g)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" }, ignored;
	int64_t now = lr_now_ms(),
		deadline = s->lease_deadline - s->grace_ms - LR_KAPPA_MS -
			   s->renew_ms;
	enum lr_status rc = LR_ERROR;
	char period[32];

	if (!c->once_per_ms)
		return 0;
	lr_run_init(&s->res->last);
	if (c->ops->run_start)
		rc = c->ops->run_start(c->st, c->once_per_ms, g->fence,
				       deadline > now ? deadline : now,
				       &s->res->last, &err);
	else
		lr_err_set(&err, "the %s store cannot record runs",
			   c->ops->name);
	if (rc == LR_OK) {
		s->run_started = 1;
		s->run_fence = g->fence;
		report(s, (struct lr_report){ .kind = LR_REP_RECORDED,
					      .ms = c->once_per_ms });
		return 0;
	}
	/* No command ran: nothing to hold, nothing to count as held. */
	give_back(s, lr_now_ms());
	s->lease_deadline = s->t_acquired = 0;
	s->t_renew = s->t_grace = s->t_kill = LR_MS_NEVER;
	if (rc == LR_BUSY) {
		s->res->outcome = LR_OUT_HELD_BACK;
		report(s, (struct lr_report){ .kind = LR_REP_HELD_BACK });
		set_state(s, DONE);
		return 1;
	}
	lr_duration_human(c->once_per_ms, period, sizeof(period));
	lr_err_set(&ignored,
		   "cannot record the start of the run (--once-per %s): %s",
		   period, err.msg[0] ? err.msg : "the store did not answer "
						  "in time");
	/* A store failing for now: the lease is given back, and a run that
	 * may wait takes it again later, as after a failed acquire. */
	ignored.heals = rc == LR_TIMEOUT || err.heals;
	if (ignored.heals && ride_out(s, lr_now_ms(), &ignored))
		return 1;
	fail(s, &ignored);
	return 1;
}

/* --once-per: the end of the run goes into its record, with the status
 * known once the group is gone (the release is still to come: a release
 * that then finds the lease lost still ends the run with 124).  A failure
 * is a warning: the run itself is over. */
static void run_end(struct sup *s)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	int64_t now = lr_now_ms(), deadline = now + 2000;
	enum lr_status rc;
	int sig, status;

	if (!s->run_started || !c->ops->run_end)
		return;
	if (s->res->outcome == LR_OUT_CHILD && !s->pid && s->res->code)
		status = s->res->code; /* the command could not start */
	else
		status = lr_exit_code(s->res->outcome, s->res->wstatus, 1,
				      &sig);
	/* Still holding: the release must come before the lease runs out. */
	if (!s->certain_loss && s->lease_deadline &&
	    s->lease_deadline - LR_KAPPA_MS < deadline)
		deadline = s->lease_deadline - LR_KAPPA_MS > now ?
				   s->lease_deadline - LR_KAPPA_MS : now;
	rc = c->ops->run_end(c->st, s->run_fence, status, deadline, &err);
	if (rc != LR_OK)
		report(s, (struct lr_report){ .kind = LR_REP_RUN_END_FAILED,
					      .why = failed(&err, rc) });
}

/* The lease went before the command started (the store's loss signal
 * said so in the last step before the spawn): nothing ran.  What the
 * store still thinks it holds is given back (compared by token, so
 * nobody else's), and the run tries again within its wait, as after a
 * conflict; it ends 124 where it cannot: with -n, once -w ran out, or
 * once --once-per recorded this start (a new grant would be held back by
 * it). */
static void lost_early(struct sup *s, int64_t now, const char *why)
{
	const struct lr_sup_cfg *c = s->cfg;
	int again = c->wait_ms != 0 && now < s->t_wait_over &&
		    !s->run_started;

	report(s, (struct lr_report){ .kind = LR_REP_LOST_EARLY, .why = why,
				      .again = again });
	lr_child_guard_files(NULL);
	give_back(s, now);
	s->lease_deadline = s->t_acquired = 0;
	s->t_renew = s->t_grace = s->t_kill = LR_MS_NEVER;
	if (again) {
		s->t_acquire = now + jitter(s, s->backoff);
		return;
	}
	s->res->outcome = LR_OUT_LOST;
	s->res->lost_early = 1;
	set_state(s, DONE);
}

/* The last step before the spawn: is the grant already gone?  Returns 1
 * after lost_early().  A suspicion (the store could not tell) starts the
 * command and renews at once. */
static int gone_already(struct sup *s)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	int64_t now = lr_now_ms();
	enum lr_status rc;

	if (!c->ops->check)
		return 0;
	rc = c->ops->check(c->st, call_deadline(s, now, s->renew_ms), &err);
	if (rc == LR_LOST) {
		lost_early(s, lr_now_ms(), failed(&err, rc));
		return 1;
	}
	if (rc != LR_OK)
		s->t_renew = lr_now_ms();
	return 0;
}

/* The lease is held and may be used: the state file first, so the
 * command can read it from its first instruction, and the guard told to
 * remove it; then, if the store still says nothing is wrong, the command
 * (which tells the guard its group itself, before its exec).  Returns
 * with the state HELD, DONE if the command could not start, or WAITING
 * (or DONE) if the lease went before it started. */
static void run_command(struct sup *s, const struct lr_grant *g)
{
	const struct lr_sup_cfg *c = s->cfg;

	report(s, (struct lr_report){ .kind = LR_REP_HOLDING });
	if (lr_state_path()) {
		const char *const rm[3] = { lr_state_path(), lr_state_tmp(),
					    lr_state_dir() };

		lr_child_guard_files(rm);
	}
	if (gone_already(s))
		return;
	s->pid = c->spawn(c->ctx, g, &s->res->code);
	if (s->pid < 0) {
		s->pid = 0;
		s->reaped = 1;
		s->res->outcome = LR_OUT_CHILD;
		set_state(s, DONE);
		return;
	}
	report(s, (struct lr_report){ .kind = LR_REP_STARTED, .n = s->pid });
	if (c->max_time_ms > 0)
		s->t_max = lr_now_ms() + c->max_time_ms;
	if (c->guard_errno)
		report(s, (struct lr_report){ .kind = LR_REP_NO_GUARD,
					      .n = c->guard_errno });
	s->t_acquire = s->t_wait_over = LR_MS_NEVER;
	set_state(s, HELD);
}

/* A fence the command may trust: 1 to INT64_MAX (a store's negative
 * number does not wrap into one) and above any fence this run saw
 * before (a grant after a lease lost before the command started).
 * Anything else is the store breaking its promise: the grant goes
 * back and the run fails.  Returns 0 after failing. */
static int fence_ok(struct sup *s, const struct lr_grant *g, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" }, ignored;

	if (g->fence >= 1 && g->fence <= INT64_MAX && g->fence > s->res->fence)
		return 1;
	c->ops->release(c->st, now + 1000, &ignored);
	s->lease_deadline = 0;
	s->t_renew = s->t_grace = s->t_kill = LR_MS_NEVER;
	lr_err_set(&err, "unexpected reply from the store: a grant with "
			 "fence %llu%s",
		   (unsigned long long)g->fence,
		   g->fence && g->fence <= INT64_MAX
			   ? ", not above the fence of an earlier grant"
			   : ", out of range");
	fail(s, &err);
	return 0;
}

/* The store failed an acquire with a fault that may heal (a restart, a
 * failover, a server full for now): a run that may wait tries again,
 * with the busy lease's backoff (50ms doubling to a second, jittered),
 * until its wait runs out; the wait's end is then a failure with this
 * fault, not a conflict.  Each new fault is said once, and its end once.
 * Returns 0 when the run cannot wait (-n, or no time left). */
static int ride_out(struct sup *s, int64_t now, const struct lr_err *err)
{
	if (s->cfg->wait_ms == 0 || now >= s->t_wait_over)
		return 0;
	s->erring = 1;
	s->last_err = *err;
	if (strcmp(s->said, err->msg) != 0) {
		snprintf(s->said, sizeof(s->said), "%s", err->msg);
		report(s, (struct lr_report){ .kind = LR_REP_FAULT,
					      .why = err->msg });
	}
	s->t_acquire = now + jitter(s, s->backoff);
	if (s->backoff < 1000)
		s->backoff *= 2;
	return 1;
}

/* The store answered again after faults: busy, or granted (with the
 * start recorded, for --once-per). */
static void healed(struct sup *s)
{
	if (!s->erring)
		return;
	s->erring = 0;
	s->said[0] = '\0';
	report(s, (struct lr_report){ .kind = LR_REP_HEALED });
}

/* How often a waiting run with who_holds looks who holds the lease, and
 * says that it still waits when the holder stays the same. */
#define WHO_EVERY_MS 2000
#define SAY_EVERY_MS 30000

/* Still busy: say whom the run waits behind when the holder changed, or
 * SAY_EVERY_MS after it last said so. */
static void waiting_again(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	char who[sizeof(s->res->holder)];
	int64_t deadline = now + 1000;
	int changed;

	if (!c->who_holds || now < s->t_who)
		return;
	s->t_who = now + WHO_EVERY_MS;
	if (s->t_wait_over < deadline)
		deadline = s->t_wait_over > now ? s->t_wait_over : now;
	c->who_holds(c->ctx, deadline, who, sizeof(who));
	lr_printable(who);
	changed = who[0] && strcmp(who, s->res->holder) != 0;
	if (!changed && now < s->t_said + SAY_EVERY_MS)
		return;
	if (who[0])
		snprintf(s->res->holder, sizeof(s->res->holder), "%s", who);
	report(s, (struct lr_report){ .kind = LR_REP_WAITING,
				      .why = s->res->holder,
				      .ms = now - s->t_start,
				      .again = changed ? 1 : 2 });
	s->t_said = now;
}

/* Busy: give up (-n), or wait, naming the holder when the wait starts
 * (and with who_holds, as waiting_again() says). */
static void busy(struct sup *s, int64_t now)
{
	if (s->cfg->wait_ms == 0) {
		holder(s, now, s->res->holder, sizeof(s->res->holder));
		conflict(s);
		return;
	}
	if (!s->waiting_logged) {
		/* Asked once, before the store starts its wait (a store may
		 * not take other calls during it). */
		holder(s, now, s->res->holder, sizeof(s->res->holder));
		report(s, (struct lr_report){ .kind = LR_REP_WAITING,
					      .why = s->res->holder });
		s->waiting_logged = 1;
		s->t_who = now + WHO_EVERY_MS;
		s->t_said = now;
	} else {
		waiting_again(s, now);
	}
	s->t_acquire = now + jitter(s, s->backoff);
	if (s->backoff < 1000)
		s->backoff *= 2;
}

static void try_acquire(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_grant g = { 0, 0 };
	struct lr_err err = { "" };
	int64_t t_send = lr_now_ms(), cap = s->ttl;
	enum lr_status rc;

	/* -w bounds the attempt (a second at least, to reach a healthy
	 * store); -n, one attempt, as its open: 2s at most. */
	if (s->t_wait_over != LR_MS_NEVER && s->t_wait_over - now < cap)
		cap = s->t_wait_over - now > 1000 ? s->t_wait_over - now : 1000;
	if (c->wait_ms == 0 && cap > 2000)
		cap = 2000;
	if (s->give_back) {
		/* The last give-back is not done: first that, or the same
		 * grant would come back. */
		rc = c->ops->release(c->st, t_send + cap, &err);
		if (rc != LR_OK && rc != LR_LOST) {
			if (!err.msg[0])
				lr_err_set(&err, "the store did not answer in "
						 "time");
			if ((rc == LR_TIMEOUT || err.heals) &&
			    ride_out(s, now, &err))
				return;
			fail(s, &err);
			return;
		}
		s->give_back = 0;
		err = (struct lr_err){ "" };
		/* The grant's validity counts from the acquire's send. */
		t_send = lr_now_ms();
	}
	rc = c->ops->acquire(c->st, t_send + cap, &g, &err);
	now = lr_now_ms();
	if (rc == LR_BUSY)
		healed(s);
	switch (rc) {
	case LR_OK:
		if (g.ttl_ms > 0 && g.ttl_ms != c->ttl_ms && !granted(s, &g)) {
			c->ops->release(c->st, now + 1000, &err);
			return;
		}
		s->lease_deadline = 0;
		extend(s, t_send);
		if (s->lease_deadline - now <
		    s->grace_ms + LR_KAPPA_MS + s->renew_ms) {
			/* Too little validity left to run safely. */
			report(s, (struct lr_report){
					.kind = LR_REP_TOO_LATE,
					.left_ms = s->lease_deadline - now });
			give_back(s, now);
			if (++s->too_late >= 5) {
				lr_err_set(&err, "the store took %lldms to "
						 "grant the lease, too long "
						 "for this TTL; use a longer "
						 "--ttl",
					   (long long)(now - t_send));
				fail(s, &err);
				return;
			}
			s->lease_deadline = 0;
			s->t_renew = s->t_grace = s->t_kill = LR_MS_NEVER;
			s->t_acquire = now + jitter(s, s->backoff);
			return;
		}
		s->too_late = 0;
		if (!fence_ok(s, &g, now))
			return;
		s->res->fence = g.fence;
		s->t_acquired = now;
		snprintf(s->node, sizeof(s->node), "%s", g.node);
		report(s, (struct lr_report){ .kind = LR_REP_ACQUIRED,
					      .slot = g.slot,
					      .node = g.node,
					      .ms = now - s->t_start,
					      .ttl = s->ttl });
		if (run_gate(s, &g))
			return;
		healed(s);
		run_command(s, &g);
		return;
	case LR_BUSY:
		busy(s, now);
		return;
	case LR_LOST:
	case LR_TIMEOUT:
	case LR_ERROR:
		if (!err.msg[0])
			lr_err_set(&err, "the store did not answer in time");
		if ((rc == LR_TIMEOUT || err.heals) && ride_out(s, now, &err))
			return;
		fail(s, &err);
		return;
	}
}

/* HELD -> AT_RISK: the first renew failed. */
static void at_risk(struct sup *s, int64_t now)
{
	int sig = s->cfg->warn_signal;

	set_state(s, AT_RISK);
	/* The state file says "at-risk" before the command is warned. */
	report(s, (struct lr_report){ .kind = LR_REP_AT_RISK,
				      .left_ms = s->lease_deadline - now,
				      .n = sig });
	if (sig)
		kill_group(s, sig);
}

/* Notes a successful renewal's round trip.  The TTL must dwarf it: once
 * the p99 (see lr_p99: never one slow renewal alone) passes a tenth of the
 * TTL, a single warning says which TTL would be safe.  Nothing else
 * changes: the deadline rules already cover a slow store. */
static void heartbeat(struct sup *s, int64_t ms)
{
	int64_t p99;

	lr_p99_add(&s->lat, ms);
	p99 = lr_p99(&s->lat);
	if (s->slow_warned || p99 * 10 <= s->ttl)
		return;
	s->slow_warned = 1;
	report(s, (struct lr_report){ .kind = LR_REP_SLOW, .ms = p99,
				      .n = s->lat.n, .ttl = s->ttl });
}

static void try_renew(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	int64_t t_send = lr_now_ms(), t1;
	enum lr_status rc;
	const char *node;
	int moved;

	rc = c->ops->renew(c->st, call_deadline(s, t_send, s->renew_ms), &err);
	t1 = lr_now_ms();
	switch (rc) {
	case LR_OK:
		extend(s, t_send);
		node = c->ops->node ? c->ops->node(c->st) : NULL;
		moved = node && *node && strcmp(node, s->node) != 0;
		/* Told to stop (at D - grace, or draining what was left):
		 * a renewal does not take that back. */
		report(s, (struct lr_report){
				  .kind = LR_REP_RENEWED,
				  .ms = t1 - t_send,
				  .left_ms = s->lease_deadline - t1,
				  .node = node,
				  .moved = moved,
				  .again = s->state == AT_RISK,
				  .stopping = s->stopped || s->timed_out ||
					      s->state == DRAINING });
		if (moved)
			snprintf(s->node, sizeof(s->node), "%s", node);
		heartbeat(s, t1 - t_send);
		if (s->state == AT_RISK)
			set_state(s, HELD);
		return;
	case LR_LOST:
		s->certain_loss = 1;
		lose(s, err.msg[0] ? err.msg : "the store says it is not ours");
		return;
	case LR_BUSY:
	case LR_TIMEOUT:
	case LR_ERROR:
		report(s, (struct lr_report){
					.kind = LR_REP_RENEW_FAILED,
					.why = failed(&err, rc),
					.ms = t1 - t_send,
					.left_ms = s->lease_deadline - t1 });
		if (s->state == HELD)
			at_risk(s, t1);
		s->t_renew = t1 + jitter(s, s->renew_ms / 3);
		return;
	}
	(void)now;
}

/* HELD or AT_RISK -> TIMED_OUT: the command ran for --max-time.  The
 * stop signal now, SIGKILL after the -k grace, as timeout(1) does; the
 * lease is kept, and given back once the group is gone. */
static void max_time(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;

	report(s, (struct lr_report){ .kind = LR_REP_TIMED_OUT,
				      .ms = c->max_time_ms,
				      .n = c->stop_signal });
	s->timed_out = 1;
	kill_group(s, c->stop_signal);
	kill_group(s, SIGCONT);
	s->t_max = LR_MS_NEVER;
	s->t_max_kill = now + c->grace_ms;
	set_state(s, TIMED_OUT);
}

/* The --splay wait: uniform in [0, splay), from the kernel's pool, since
 * rand_r's seed could repeat across a fleet whose crons fire at once. */
static int64_t splay_draw(struct sup *s, int64_t splay)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)rand_r(&s->seed) << 31 ^
		    (uint64_t)rand_r(&s->seed);
	return (int64_t)(r % (uint64_t)splay);
}

/* SPLAYING -> WAITING, for the first attempt; -w counts from here. */
static void splay_over(struct sup *s, int64_t now)
{
	s->t_start = now;
	s->t_wait_over = s->cfg->wait_ms > 0 ? now + s->cfg->wait_ms
					       : LR_MS_NEVER;
	set_state(s, WAITING);
}

/* Reaps everything (we are a subreaper) and notes the command's end. */
static void reap(struct sup *s)
{
	int ws;
	pid_t p;

	while ((p = waitpid(-1, &ws, WNOHANG)) > 0) {
		if (p == s->pid && !s->reaped) {
			s->reaped = 1;
			s->res->wstatus = ws;
			report(s, (struct lr_report){ .kind = LR_REP_EXITED,
						      .n = ws });
		}
	}
}

/* After the command is reaped: is the rest of its group gone? */
static void after_exit(struct sup *s, int64_t now)
{
	if (lr_child_group_alive(s->pid, s->cfg->foreground)) {
		if (s->state == LOST) {
			kill_group(s, SIGKILL);
			return;
		}
		if (s->state != DRAINING) {
			report(s, (struct lr_report){
					  .kind = LR_REP_DRAINING });
			kill_group(s, s->cfg->stop_signal);
			kill_group(s, SIGCONT);
			s->t_drain_kill = now + s->grace_ms;
			set_state(s, DRAINING);
		}
		return;
	}
	/* Nothing left for the guard to kill, nor a group that reuses the
	 * number. */
	lr_child_guard_group(0);
	s->res->outcome = s->stopped     ? LR_OUT_LOST
			  : s->timed_out ? LR_OUT_TIMEOUT
					 : LR_OUT_CHILD;
	report(s, (struct lr_report){ .kind = LR_REP_GONE,
				      .n = s->res->outcome });
	set_state(s, DONE);
}

/* The state x event table: one action per event, each saying what it
 * does in every state.  An action returns -1 for a pair that cannot
 * happen. */

static int on_acquire(struct sup *s, int64_t now)
{
	if (s->state == SPLAYING)
		splay_over(s, now);
	else if (s->state != WAITING)
		return -1;
	try_acquire(s, now);
	return 0;
}

static int on_wait_over(struct sup *s, int64_t now)
{
	(void)now;
	if (s->state != WAITING)
		return -1;
	if (s->erring) /* the store, not a holder, kept us out */
		fail(s, &s->last_err);
	else
		conflict(s); /* res->holder: as seen when the wait began */
	return 0;
}

/* The states in which the lease is ours to renew, and so to lose: the
 * command runs, or its group is being stopped.  The states with a
 * command to signal or reap are these and LOST. */
static int renewing(enum state st)
{
	switch (st) {
	case HELD:
	case AT_RISK:
	case STOPPING:
	case DRAINING:
	case TIMED_OUT:
		return 1;
	case WAITING:
	case LOST:
	case DONE:
	case SPLAYING:
		return 0;
	}
	return 0;
}

static int on_renew(struct sup *s, int64_t now)
{
	if (!renewing(s->state))
		return -1;
	try_renew(s, now);
	return 0;
}

/* D - grace: the renewal that should have moved D did not come. */
static void stop_at_deadline(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;

	report(s, (struct lr_report){ .kind = LR_REP_STOPPING,
				      .left_ms = s->lease_deadline - now,
				      .n = c->stop_signal });
	s->stopped = 1;
	kill_group(s, c->stop_signal);
	kill_group(s, SIGCONT);
	if (s->state != DRAINING)
		set_state(s, STOPPING);
	s->t_grace = LR_MS_NEVER; /* t_kill stays where D put it */
}

static int on_grace(struct sup *s, int64_t now)
{
	switch (s->state) {
	case HELD: /* the renew that should have moved D is late */
	case AT_RISK:
	case DRAINING:
		stop_at_deadline(s, now);
		return 0;
	case TIMED_OUT:
		/* The stop signal went already; t_kill stays. */
		s->t_grace = LR_MS_NEVER;
		return 0;
	case WAITING:
	case STOPPING:
	case LOST:
	case DONE:
	case SPLAYING:
		return -1;
	}
	return -1;
}

static int on_kill(struct sup *s, int64_t now)
{
	(void)now;
	if (!renewing(s->state))
		return -1;
	lose(s, s->state == STOPPING ? "the command did not stop in time"
				     : "the deadline passed without a renewal");
	return 0;
}

static int on_drain_kill(struct sup *s, int64_t now)
{
	(void)now;
	if (s->state != DRAINING)
		return -1;
	kill_group(s, SIGKILL);
	s->t_drain_kill = LR_MS_NEVER;
	return 0;
}

static int on_store(struct sup *s, int64_t now)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	enum lr_status rc;

	rc = c->ops->process(c->st, s->revents,
			     call_deadline(s, now, s->renew_ms), &err);
	switch (s->state) {
	case WAITING:
		if (rc != LR_BUSY)
			s->t_acquire = now;
		return 0;
	case SPLAYING:
		return 0; /* the store kept its session: no news */
	case HELD:
	case AT_RISK:
	case STOPPING:
	case DRAINING:
	case TIMED_OUT:
		if (rc == LR_LOST) {
			s->certain_loss = 1;
			lose(s, err.msg[0] ? err.msg
					   : "the store reports it gone");
		} else if (rc == LR_ERROR || rc == LR_TIMEOUT) {
			s->t_renew = now; /* suspicion: check now */
		}
		return 0;
	case LOST:
	case DONE:
		return 0; /* nothing more to learn */
	}
	return -1;
}

/* A signal while there is no command: ^Z stops us, as asked; WINCH and
 * CONT mean nothing; anything else ends leaserun by that signal. */
static void signal_while_waiting(struct sup *s)
{
	if (s->signo == SIGWINCH || s->signo == SIGCONT)
		return;
	if (s->signo == SIGTSTP) {
		kill(getpid(), SIGSTOP);
		return;
	}
	s->res->outcome = LR_OUT_FAILED;
	s->res->die_signal = s->signo;
	lr_err_set(&s->res->err, "stopped by signal %d while waiting",
		   s->signo);
	set_state(s, DONE);
}

static int on_signal(struct sup *s, int64_t now)
{
	(void)now;
	switch (s->state) {
	case WAITING:
	case SPLAYING:
		signal_while_waiting(s);
		return 0;
	case HELD:
	case AT_RISK:
	case STOPPING:
	case DRAINING:
	case TIMED_OUT:
		/* In --foreground the terminal already signalled the
		 * command: do not send a second ^C. */
		if (s->cfg->foreground && s->sicode == SI_KERNEL)
			return 0;
		lr_log(LR_LOG_DEBUG, "signal", "forwarding signal %d",
		       s->signo);
		/* SIGTSTP stops the command, not us: we go on
		 * renewing while the job is suspended. */
		kill_group(s, s->signo);
		return 0;
	case LOST:
	case DONE:
		return 0;
	}
	return -1;
}

static int on_child(struct sup *s, int64_t now)
{
	switch (s->state) {
	case WAITING:
	case SPLAYING:
		/* A store's own child (the file store's flocker): the store
		 * reaps it. */
		return 0;
	case HELD:
	case AT_RISK:
	case STOPPING:
	case LOST:
	case DRAINING:
	case TIMED_OUT:
		reap(s);
		if (s->reaped)
			after_exit(s, now);
		return 0;
	case DONE:
		reap(s);
		return 0;
	}
	return -1;
}

static int on_max_time(struct sup *s, int64_t now)
{
	switch (s->state) {
	case HELD:
	case AT_RISK:
		max_time(s, now);
		return 0;
	case STOPPING: /* the lease's deadline stops it already */
	case DRAINING: /* it ended; its leftovers are being stopped */
	case LOST:     /* killed already */
		s->t_max = LR_MS_NEVER;
		return 0;
	case WAITING:
	case SPLAYING:
	case TIMED_OUT:
	case DONE:
		return -1;
	}
	return -1;
}

static int on_max_kill(struct sup *s, int64_t now)
{
	(void)now;
	switch (s->state) {
	case TIMED_OUT:
	case DRAINING: /* timed out, then the command itself ended */
		kill_group(s, SIGKILL);
		s->t_max_kill = LR_MS_NEVER;
		return 0;
	case LOST: /* killed already */
		s->t_max_kill = LR_MS_NEVER;
		return 0;
	case WAITING:
	case SPLAYING:
	case HELD:
	case AT_RISK:
	case STOPPING:
	case DONE:
		return -1;
	}
	return -1;
}

static int (*const actions[])(struct sup *, int64_t) = {
	[EV_ACQUIRE] = on_acquire,	 [EV_WAIT_OVER] = on_wait_over,
	[EV_RENEW] = on_renew,		 [EV_GRACE] = on_grace,
	[EV_KILL] = on_kill,		 [EV_DRAIN_KILL] = on_drain_kill,
	[EV_STORE] = on_store,		 [EV_SIGNAL] = on_signal,
	[EV_CHILD] = on_child,		 [EV_MAX_TIME] = on_max_time,
	[EV_MAX_KILL] = on_max_kill,
};

static int handle(struct sup *s, enum event ev, int64_t now)
{
	return actions[ev](s, now);
}

/* The release found the lease not ours any more (expired, deleted,
 * taken): the command may have run without it.  The run ends with 124
 * and counts as lost, whatever the command's own status or signal,
 * unless no command ran (126/127) or leaserun failed (125). */
static void found_lost(struct sup *s, const char *why)
{
	int lost = s->res->outcome == LR_OUT_CHILD && s->pid > 0;

	if (lost) {
		s->res->outcome = LR_OUT_LOST;
		s->res->lost_at_release = 1;
	}
	report(s, (struct lr_report){ .kind = LR_REP_FOUND_LOST, .why = why,
				      .lost = lost });
}

/* The command's group is gone: give the lease back.  A store down for
 * now is asked again (backoff 50ms doubling to a second) until the
 * lease's deadline, after which it expires by itself. */
static void release(struct sup *s)
{
	const struct lr_sup_cfg *c = s->cfg;
	struct lr_err err = { "" };
	int64_t until = s->lease_deadline ? s->lease_deadline - LR_KAPPA_MS : 0;
	int64_t pause = 50;
	enum lr_status rc;

	/* Whatever escaped the group must not read "held" from here on. */
	report(s, (struct lr_report){ .kind = LR_REP_RELEASING });
	rc = c->ops->release(c->st, lr_now_ms() + 5000, &err);
	while ((rc == LR_TIMEOUT || (rc == LR_ERROR && err.heals)) &&
	       lr_now_ms() + pause < until) {
		poll(NULL, 0, (int)pause);
		if (pause < 1000)
			pause *= 2;
		err = (struct lr_err){ "", 0 };
		rc = c->ops->release(c->st, until, &err);
	}
	if (rc == LR_OK)
		report(s, (struct lr_report){
				  .kind = LR_REP_RELEASED,
				  .ms = lr_now_ms() - s->t_acquired });
	else if (rc == LR_LOST)
		found_lost(s, err.msg[0] ? err.msg
					 : "the store says it is not ours");
	else
		report(s, (struct lr_report){ .kind = LR_REP_RELEASE_FAILED,
					      .why = failed(&err, rc) });
}

/* The earliest time at which something is due, or LR_MS_NEVER. */
static int64_t next_deadline(const struct sup *s)
{
	const int64_t t[] = { s->t_kill,    s->t_grace,	    s->t_drain_kill,
			      s->t_max,	    s->t_max_kill,  s->t_wait_over,
			      s->t_renew,   s->t_acquire };
	int64_t next = LR_MS_NEVER;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i] < next)
			next = t[i];
	return next;
}

/* The starting state: waiting, or splaying first. */
static void start(struct sup *s, const struct lr_sup_cfg *cfg,
		  struct lr_sup_result *res)
{
	memset(res, 0, sizeof(*res));
	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->res = res;
	s->state = WAITING;
	s->ttl = cfg->ttl_ms;
	s->renew_ms = cfg->renew_ms;
	s->grace_ms = cfg->grace_ms;
	s->t_acquire = s->t_start = lr_now_ms();
	s->t_wait_over = cfg->wait_ms > 0 ? s->t_acquire + cfg->wait_ms
					   : LR_MS_NEVER;
	s->t_renew = s->t_grace = s->t_kill = s->t_drain_kill = LR_MS_NEVER;
	s->t_max = s->t_max_kill = LR_MS_NEVER;
	s->backoff = 50;
	s->seed = (unsigned)getpid() ^ (unsigned)s->t_acquire;
	s->rep = (struct lr_reporter){ cfg->name, cfg->limit, cfg->shared, 0 };
	if (cfg->splay_ms > 0) {
		int64_t d = splay_draw(s, cfg->splay_ms);

		s->state = SPLAYING;
		s->t_acquire += d;
		s->t_wait_over = LR_MS_NEVER;
		report(s, (struct lr_report){ .kind = LR_REP_SPLAY, .ms = d });
	}
}

/* The deadline due now, the most urgent first; -1 if none is. */
static int due(const struct sup *s, int64_t now)
{
	if (now >= s->t_kill)
		return EV_KILL;
	if (now >= s->t_grace)
		return EV_GRACE;
	if (now >= s->t_max_kill)
		return EV_MAX_KILL;
	if (now >= s->t_drain_kill)
		return EV_DRAIN_KILL;
	if (now >= s->t_max)
		return EV_MAX_TIME;
	if (now >= s->t_wait_over)
		return EV_WAIT_OVER;
	if (now >= s->t_renew)
		return EV_RENEW;
	if (now >= s->t_acquire)
		return EV_ACQUIRE;
	return -1;
}

/* Every signal read from the signalfd, as events.  -1 on an impossible
 * pair. */
static int signals(struct sup *s, int64_t now)
{
	struct signalfd_siginfo si;
	enum event ev;

	while (s->state != DONE &&
	       read(s->cfg->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			ev = EV_CHILD;
		} else {
			ev = EV_SIGNAL;
			s->signo = (int)si.ssi_signo;
			s->sicode = si.ssi_code;
		}
		if (handle(s, ev, now) < 0)
			return -1;
	}
	return 0;
}

/* The one blocking point: arms the timer at the next deadline, polls the
 * signalfd, the timer and the store's fd, and handles what woke us.
 * Returns 0, -1 on an impossible pair (internal error), or -2 when poll()
 * failed (res->err says why). */
static int wait_once(struct sup *s, int tfd)
{
	const struct lr_sup_cfg *cfg = s->cfg;
	struct pollfd pfd[3];
	int64_t now = lr_now_ms(), next = next_deadline(s);
	int nfd = 2, sfd = -1;
	short want = 0;

	/* A leftover group member may have no parent of ours to tell us it
	 * went: look again now and then. */
	if ((s->state == DRAINING || s->state == LOST) && s->reaped &&
	    now + 100 < next)
		next = now + 100;
	lr_timerfd_arm(tfd, next == LR_MS_NEVER ? -1 : next);

	pfd[0] = (struct pollfd){ cfg->sigfd, POLLIN, 0 };
	pfd[1] = (struct pollfd){ tfd, POLLIN, 0 };
	if (cfg->ops->wait_fd && cfg->ops->process && s->state != LOST)
		sfd = cfg->ops->wait_fd(cfg->st, &want);
	if (sfd >= 0) {
		pfd[2] = (struct pollfd){ sfd, want, 0 };
		nfd = 3;
	}
	if (poll(pfd, (nfds_t)nfd, -1) < 0) {
		if (errno == EINTR)
			return 0;
		lr_err_set(&s->res->err, "poll: %s", strerror(errno));
		s->res->outcome = LR_OUT_FAILED;
		return -2;
	}
	now = lr_now_ms();
	if (pfd[1].revents) {
		uint64_t n;

		if (read(tfd, &n, sizeof(n)) < 0) {
			/* spurious or cancelled: deadlines rechecked */
		}
		if ((s->state == DRAINING || s->state == LOST) && s->reaped)
			after_exit(s, now);
	}
	/* A deadline that passed while we slept comes before what woke us:
	 * a command that exits after its kill deadline ran past what the
	 * lease promised.  The signals and the store's fd stay readable for
	 * the next turn. */
	if (now >= next_deadline(s))
		return 0;
	if ((pfd[0].revents & POLLIN) && signals(s, now) < 0)
		return -1;
	if (nfd == 3 && pfd[2].revents && s->state != DONE) {
		/* Deadlines that passed meanwhile come first. */
		now = lr_now_ms();
		if (now < s->t_kill) {
			s->revents = pfd[2].revents;
			if (handle(s, EV_STORE, now) < 0)
				return -1;
		}
	}
	return 0;
}

/* The end of every run: the group is gone (killed here if an error path
 * left it), the end is recorded, the lease given back if it may still be
 * ours, and only then the state file goes and the guard stands down. */
static void end_run(struct sup *s)
{
	const struct lr_sup_cfg *cfg = s->cfg;
	struct lr_sup_result *res = s->res;

	/* Only the error paths get here with the group alive: it must be
	 * gone before the lease is given back, or not given back at all. */
	if (s->pid > 0 &&
	    (!s->reaped || lr_child_group_alive(s->pid, cfg->foreground))) {
		int64_t until = lr_now_ms() + 2000;

		kill_group(s, SIGKILL);
		while ((!s->reaped ||
			lr_child_group_alive(s->pid, cfg->foreground)) &&
		       lr_now_ms() < until) {
			reap(s);
			poll(NULL, 0, 10);
		}
		if (!s->reaped ||
		    lr_child_group_alive(s->pid, cfg->foreground)) {
			/* (Said only of a lease not already lost.) */
			s->outlived = !s->certain_loss;
			s->certain_loss = 1; /* let it expire instead */
		} else
			lr_child_guard_group(0);
	}
	if (s->t_acquired)
		report(s, (struct lr_report){
				  .kind = LR_REP_HOLD_OVER,
				  .ms = lr_now_ms() - s->t_acquired });
	run_end(s);
	/* Release only after the whole group is gone, and only what may
	 * still be ours; the store compares the token. */
	if (s->pid > 0 ||
	    (res->outcome == LR_OUT_CHILD && !s->pid && res->code)) {
		if (!s->certain_loss)
			release(s);
		else
			report(s, (struct lr_report){
					  .kind = LR_REP_NOT_RELEASED,
					  .why = s->outlived ? "the command's "
						"process group outlived SIGKILL "
						"(a member leaserun may not "
						"signal): the lease is not "
						"given back; it ends with "
						"leaserun's session, or at its "
						"TTL, while that member may "
						"still run" : NULL });
	} else if (s->give_back) {
		/* No command ran, and a give-back before a retry was not
		 * done: once more, so that a store whose lease outlives
		 * our session (a key with a TTL) is not left held. */
		give_back(s, lr_now_ms());
	}
	/* Removed only now that the release has said whether the lease was
	 * ours to the end; until then it reads "releasing" or "lost". */
	report(s, (struct lr_report){ .kind = LR_REP_END });
	/* The guard removed it until now if we were killed while releasing;
	 * now it has nothing left to do, and exits when we do. */
	lr_child_guard_files(NULL);
}

void lr_supervise(const struct lr_sup_cfg *cfg, struct lr_sup_result *res)
{
	struct sup s;
	int tfd, ev, rc = 0;

	start(&s, cfg, res);
	tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (tfd < 0) {
		lr_err_set(&res->err, "timerfd_create: %s", strerror(errno));
		res->outcome = LR_OUT_FAILED;
		return;
	}
	while (s.state != DONE && rc == 0) {
		int64_t now = lr_now_ms();

		/* Deadlines first, the most urgent first; then wait. */
		ev = due(&s, now);
		if (ev >= 0)
			rc = handle(&s, (enum event)ev, now);
		else
			rc = wait_once(&s, tfd);
	}
	if (rc == -1) {
		lr_err_set(&res->err,
			   "internal error: no transition from state %s",
			   state_names[s.state]);
		res->outcome = LR_OUT_FAILED;
	}
	end_run(&s);
	close(tfd);
}

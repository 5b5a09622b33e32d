/*
 * be-fault.c - a test-only store: another store with faults on demand.
 *
 * URL fault:///DIR wraps the file store in DIR; fault+SCHEME://... wraps
 * the store of SCHEME://... (a real server's).  Before each call the
 * store reads its control file, DIR/NAME.fault (for a wrapped network
 * store $LEASERUN_FAULT_DIR/NAME.fault), lines of OP=MODE with OP one of
 * open, acquire, renew, release, run_start, run_end and MODE one of
 *	ok      behave as the wrapped store
 *	fail    return LR_ERROR ("injected failure")
 *	lost    return LR_LOST
 *	stall   block until the call's deadline, then LR_TIMEOUT
 * lines of OP.delay=MS: the call first takes MS milliseconds (never
 * past its deadline), then does what its OP=MODE line says (ok without
 * one): a slow store that still answers; and lines of OP.pause=before
 * or OP.pause=after: before the call, or after it returned LR_OK, the
 * store creates NAME.paused beside the control file and waits until the
 * test removes it (at most a minute), whatever the call's deadline: a
 * leaserun descheduled at that moment, while the test ends the lease
 * (deletes the key, ends the session...) at a known point.  So the tests
 * can drive the supervisor's at-risk, stop and loss paths with real
 * processes, real servers and real clocks.  Never installed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stores.h"
#include "file/file.h"

struct fault {
	const struct lr_store_ops *in; /* the wrapped store */
	struct lr_store *st;           /* its handle */
	struct lr_store_req req;       /* fault+: the request it was given */
	struct lr_url *u;              /* fault+: the URL without "fault+" */
	char ctl[PATH_MAX];
	char paused[PATH_MAX];
};

/* The module's handle is our own struct; the wrapped store's is inside. */
#define F(st) ((struct fault *)(void *)(st))

/* Sleeps until until, or until deadline if that comes first. */
static void sleep_until(int64_t until, int64_t deadline)
{
	int64_t now;

	if (deadline < until)
		until = deadline;
	while ((now = lr_now_ms()) < until)
		poll(NULL, 0, (int)(until - now));
}

/* OP.pause=when: NAME.paused, then wait until the test removes it. */
static void pause_if(struct fault *f, const char *buf, const char *op,
		     const char *when)
{
	char key[48];
	const char *line;
	int64_t until = lr_now_ms() + 60000;
	int fd;

	snprintf(key, sizeof(key), "%s.pause=%s\n", op, when);
	for (line = buf; (line = strstr(line, key)); line++)
		if (line == buf || line[-1] == '\n')
			break;
	if (!line)
		return;
	fd = open(f->paused, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	while (access(f->paused, F_OK) == 0 && lr_now_ms() < until)
		poll(NULL, 0, 2);
}

/* The control file, "" if there is none. */
static void control(const struct fault *f, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(f->ctl, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0)
		return;
	n = read(fd, buf, len - 2);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	strcat(buf, "\n"); /* every line ends with one */
}

static enum lr_status inject(struct fault *f, const char *op,
			     int64_t deadline, struct lr_err *err)
{
	char buf[512], key[32], delay[32], *line, *save = NULL;

	control(f, buf, sizeof(buf));
	if (!buf[0])
		return LR_OK;
	pause_if(f, buf, op, "before");
	snprintf(key, sizeof(key), "%s=", op);
	snprintf(delay, sizeof(delay), "%s.delay=", op);
	for (line = buf; (line = strstr(line, delay)); line++)
		if (line == buf || line[-1] == '\n')
			sleep_until(lr_now_ms() + atoi(line + strlen(delay)),
				    deadline);
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *mode;

		if (strncmp(line, key, strlen(key)) != 0)
			continue;
		mode = line + strlen(key);
		if (strcmp(mode, "fail") == 0) {
			lr_err_set(err, "injected %s failure", op);
			return LR_ERROR;
		}
		if (strcmp(mode, "lost") == 0) {
			lr_err_set(err, "injected %s loss", op);
			return LR_LOST;
		}
		if (strcmp(mode, "stall") == 0) {
			sleep_until(deadline, deadline);
			lr_err_set(err, "injected %s stall", op);
			return LR_TIMEOUT;
		}
	}
	return LR_OK;
}

/* After a call: OP.pause=after, if it succeeded. */
static enum lr_status after(struct fault *f, const char *op,
			    enum lr_status rc)
{
	char buf[512];

	if (rc != LR_OK)
		return rc;
	control(f, buf, sizeof(buf));
	if (buf[0])
		pause_if(f, buf, op, "after");
	return rc;
}

/* fault+SCHEME://...: the request for the wrapped store, and the store
 * itself (stores.c, linked in, loads its module as the core would). */
static int wrap(struct fault *f, const struct lr_store_req *req,
		struct lr_err *err)
{
	const char *dir = getenv("LEASERUN_FAULT_DIR");
	char why[256];

	if (!dir || !*dir) {
		lr_err_set(err, "the fault store needs LEASERUN_FAULT_DIR "
				"for %s",
			   req->u->scheme);
		return -1;
	}
	if (lr_url_parse(req->url + strlen("fault+"), &f->u, why,
			 sizeof(why)) < 0) {
		lr_err_set(err, "%s", why);
		return -1;
	}
	f->in = lr_store_find(f->u->scheme, err);
	if (!f->in)
		return -1;
	f->req = *req;
	f->req.url = req->url + strlen("fault+");
	f->req.u = f->u;
	/* Our open and acquire can pause between the two (open.pause,
	 * acquire.delay): the wrapped store must not send its first try
	 * with its open. */
	f->req.acquire_next = 0;
	snprintf(f->ctl, sizeof(f->ctl), "%s/%s.fault", dir, req->name);
	return 0;
}

static enum lr_status fault_open(const struct lr_store_req *req,
				 int64_t deadline, struct lr_store **out,
				 struct lr_err *err)
{
	struct fault *f = calloc(1, sizeof(*f));

	*out = (struct lr_store *)(void *)f;
	if (!f) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	if (strcmp(req->u->scheme, "fault") != 0) {
		if (wrap(f, req, err) < 0)
			return LR_ERROR;
		req = &f->req;
	} else if (!req->u->path[0] || strcmp(req->u->path, "/") == 0) {
		lr_err_set(err, "the fault store needs fault:///DIR");
		return LR_ERROR;
	} else {
		f->in = &lr_file_ops;
		snprintf(f->ctl, sizeof(f->ctl), "%s/%s.fault", req->u->path,
			 req->name);
	}
	snprintf(f->paused, sizeof(f->paused), "%.*s.paused",
		 (int)(strlen(f->ctl) - strlen(".fault")), f->ctl);
	if (inject(f, "open", deadline, err) != LR_OK)
		return err->msg[0] ? LR_ERROR : LR_TIMEOUT;
	return f->in->open(req, deadline, &f->st, err);
}

static enum lr_status fault_acquire(struct lr_store *st, int64_t deadline,
				    struct lr_grant *g, struct lr_err *err)
{
	struct fault *f = F(st);
	enum lr_status rc = inject(f, "acquire", deadline, err);

	if (rc != LR_OK)
		return rc;
	return after(f, "acquire", f->in->acquire(f->st, deadline, g, err));
}

static int fault_wait_fd(struct lr_store *st, short *events)
{
	struct fault *f = F(st);

	return f->in->wait_fd ? f->in->wait_fd(f->st, events) : -1;
}

static enum lr_status fault_process(struct lr_store *st, short revents,
				    int64_t deadline, struct lr_err *err)
{
	struct fault *f = F(st);

	return f->in->process ? f->in->process(f->st, revents, deadline, err)
			      : LR_OK;
}

static enum lr_status fault_check(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	struct fault *f = F(st);

	return f->in->check ? f->in->check(f->st, deadline, err) : LR_OK;
}

static enum lr_status fault_renew(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	struct fault *f = F(st);
	enum lr_status rc = inject(f, "renew", deadline, err);

	if (rc != LR_OK)
		return rc;
	return after(f, "renew", f->in->renew(f->st, deadline, err));
}

static enum lr_status fault_release(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	struct fault *f = F(st);
	enum lr_status rc = inject(f, "release", deadline, err);

	if (rc != LR_OK)
		return rc;
	return after(f, "release", f->in->release(f->st, deadline, err));
}

static enum lr_status fault_inspect(struct lr_store *st, int64_t deadline,
				    struct lr_info *info, struct lr_err *err)
{
	struct fault *f = F(st);

	return f->in->inspect(f->st, deadline, info, err);
}

static enum lr_status fault_break(struct lr_store *st, int slot,
				  int64_t deadline, struct lr_err *err)
{
	struct fault *f = F(st);

	if (!f->in->break_lease) {
		lr_err_set(err, "the %s store cannot break a lease",
			   f->in->name);
		return LR_ERROR;
	}
	return f->in->break_lease(f->st, slot, deadline, err);
}

static enum lr_status fault_run_start(struct lr_store *st, int64_t period,
				      uint64_t fence, int64_t deadline,
				      struct lr_run *last, struct lr_err *err)
{
	struct fault *f = F(st);
	enum lr_status rc = inject(f, "run_start", deadline, err);

	if (rc != LR_OK)
		return rc;
	if (!f->in->run_start) {
		lr_err_set(err, "the %s store cannot record runs",
			   f->in->name);
		return LR_ERROR;
	}
	return after(f, "run_start",
		     f->in->run_start(f->st, period, fence, deadline, last,
				      err));
}

static enum lr_status fault_run_end(struct lr_store *st, uint64_t fence,
				    int status, int64_t deadline,
				    struct lr_err *err)
{
	struct fault *f = F(st);
	enum lr_status rc = inject(f, "run_end", deadline, err);

	if (rc != LR_OK || !f->in->run_end)
		return rc;
	return after(f, "run_end",
		     f->in->run_end(f->st, fence, status, deadline, err));
}

static enum lr_status fault_run_last(struct lr_store *st, int64_t deadline,
				     struct lr_run *last, struct lr_err *err)
{
	struct fault *f = F(st);

	if (!f->in->run_last) {
		last->known = 0;
		return LR_OK;
	}
	return f->in->run_last(f->st, deadline, last, err);
}

static void fault_close(struct lr_store *st)
{
	struct fault *f = F(st);

	if (!f)
		return;
	if (f->in)
		f->in->close(f->st);
	lr_url_free(f->u);
	free(f);
}

const struct lr_store_ops lr_store_ops = {
	.abi = LR_STORE_ABI,
	.name = "fault",
	/* No LR_CAP_LIMIT or LR_CAP_SHARED: the tests show that a store
	 * without them is refused. */
	.open = fault_open,
	.acquire = fault_acquire,
	.wait_fd = fault_wait_fd,
	.process = fault_process,
	.check = fault_check,
	.renew = fault_renew,
	.release = fault_release,
	.inspect = fault_inspect,
	.break_lease = fault_break,
	.close = fault_close,
	.run_start = fault_run_start,
	.run_end = fault_run_end,
	.run_last = fault_run_last,
};

/*
 * be-fault.c - a test-only store: the file store with faults on demand.
 *
 * URL fault:///DIR.  Before each call the store reads DIR/NAME.fault,
 * lines of OP=MODE with OP one of acquire, renew, release, run_start,
 * run_end and MODE one of
 *	ok      behave as the file store
 *	fail    return LR_ERROR ("injected failure")
 *	lost    return LR_LOST
 *	stall   block until the call's deadline, then LR_TIMEOUT
 * and lines of OP.delay=MS: the call first takes MS milliseconds (never
 * past its deadline), then does what its OP=MODE line says (ok without
 * one): a slow store that still answers.  So the tests can drive the
 * supervisor's at-risk, stop and loss paths with real processes and real
 * clocks.  Never installed.
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

#include "backend.h"
#include "be-file.h"

struct fault {
	struct lr_store *file;
	char ctl[PATH_MAX];
};

/* The module's handle is our own struct; the file store's is inside. */
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

static enum lr_status inject(struct fault *f, const char *op,
			     int64_t deadline, struct lr_err *err)
{
	char buf[512], key[32], delay[32], *line, *save = NULL;
	ssize_t n;
	int fd = open(f->ctl, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return LR_OK;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
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
	if (!req->u->path[0] || strcmp(req->u->path, "/") == 0) {
		lr_err_set(err, "the fault store needs fault:///DIR");
		return LR_ERROR;
	}
	snprintf(f->ctl, sizeof(f->ctl), "%s/%s.fault", req->u->path,
		 req->name);
	return lr_file_ops.open(req, deadline, &f->file, err);
}

static enum lr_status fault_acquire(struct lr_store *st, int64_t deadline,
				    struct lr_grant *g, struct lr_err *err)
{
	enum lr_status rc = inject(F(st), "acquire", deadline, err);

	return rc != LR_OK ? rc
			   : lr_file_ops.acquire(F(st)->file, deadline, g, err);
}

static int fault_wait_fd(struct lr_store *st, short *events)
{
	return lr_file_ops.wait_fd(F(st)->file, events);
}

static enum lr_status fault_process(struct lr_store *st, short revents,
				    int64_t deadline, struct lr_err *err)
{
	return lr_file_ops.process(F(st)->file, revents, deadline, err);
}

static enum lr_status fault_renew(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	enum lr_status rc = inject(F(st), "renew", deadline, err);

	return rc != LR_OK ? rc : lr_file_ops.renew(F(st)->file, deadline, err);
}

static enum lr_status fault_release(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	enum lr_status rc = inject(F(st), "release", deadline, err);

	return rc != LR_OK ? rc
			   : lr_file_ops.release(F(st)->file, deadline, err);
}

static enum lr_status fault_inspect(struct lr_store *st, int64_t deadline,
				    struct lr_info *info, struct lr_err *err)
{
	return lr_file_ops.inspect(F(st)->file, deadline, info, err);
}

static enum lr_status fault_break(struct lr_store *st, int slot,
				  int64_t deadline, struct lr_err *err)
{
	return lr_file_ops.brk(F(st)->file, slot, deadline, err);
}

static enum lr_status fault_run_start(struct lr_store *st, int64_t period,
				      uint64_t fence, int64_t deadline,
				      struct lr_run *last, struct lr_err *err)
{
	enum lr_status rc = inject(F(st), "run_start", deadline, err);

	return rc != LR_OK ? rc
			   : lr_file_ops.run_start(F(st)->file, period, fence,
						   deadline, last, err);
}

static enum lr_status fault_run_end(struct lr_store *st, int status,
				    int64_t deadline, struct lr_err *err)
{
	enum lr_status rc = inject(F(st), "run_end", deadline, err);

	return rc != LR_OK ? rc
			   : lr_file_ops.run_end(F(st)->file, status, deadline,
						 err);
}

static enum lr_status fault_run_last(struct lr_store *st, int64_t deadline,
				     struct lr_run *last, struct lr_err *err)
{
	return lr_file_ops.run_last(F(st)->file, deadline, last, err);
}

static void fault_close(struct lr_store *st)
{
	if (!st)
		return;
	lr_file_ops.close(F(st)->file);
	free(F(st));
}

const struct lr_store_ops lr_store_ops = {
	.abi = LR_STORE_ABI,
	.name = "fault",
	/* No LR_CAP_LIMIT or LR_CAP_SHARED: the tests show that a store
	 * without them is refused. */
	.caps = LR_CAP_BREAK,
	.open = fault_open,
	.acquire = fault_acquire,
	.wait_fd = fault_wait_fd,
	.process = fault_process,
	.renew = fault_renew,
	.release = fault_release,
	.inspect = fault_inspect,
	.brk = fault_break,
	.close = fault_close,
	.run_start = fault_run_start,
	.run_end = fault_run_end,
	.run_last = fault_run_last,
};

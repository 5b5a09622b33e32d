/* failcall.c - an LD_PRELOAD shim that makes one call of leaserun's fail
 * with a chosen errno, so that the tests reach the error paths a healthy
 * system never takes: a poll() that fails while the command runs, a
 * group guard that cannot be started, a signalfd() refused, a pipe2()
 * out of descriptors, a fork() out of processes, a state directory that
 * cannot be made private, a disk that cannot make a fence durable, a
 * store that cannot draw a random lease ID, a socket that takes nothing
 * more for now, a timer that cannot be made.
 *
 *	LR_TEST_FAIL=CALL:ERRNO[:SKIP[:FILE]]
 *
 * CALL is one of poll, clone, fork, signalfd, pipe2, chmod, rename,
 * fsync, fdatasync, getrandom, send, timerfd_create, flock (the file
 * store helper's: see below); ERRNO a number (for poll, 0: it returns 0
 * at once, nothing ready, as a poll() woken before its time does; for
 * send, EAGAIN is a socket that takes nothing more for now, as a full
 * one).  From the moment FILE exists (from the start without one; the
 * command can create it once it runs), the first SKIP calls (default 0)
 * go through, the next one fails, and every later one goes through
 * again.  LR_TEST_FAIL_MARK, if set, names a file created when the call
 * has failed, so a test can tell "the path ran" from "the shim missed".
 *
 * Only in leaserun's own process: the first process to load the shim
 * records its pid in LR_TEST_FAIL_PID, and its children (the command,
 * which inherits LD_PRELOAD, the file store's helper, the vfork()ed
 * child before its exec) see another pid and are left alone; but for
 * flock, which fails only in the file store's helper.  Never
 * installed. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

static char call[16], file[4096];
static int err_no, skip, armed, done;
static pid_t owner;

__attribute__((constructor)) static void setup(void)
{
	const char *spec = getenv("LR_TEST_FAIL"), *p, *own;
	char pid[24];

	if (!spec)
		return;
	own = getenv("LR_TEST_FAIL_PID");
	if (!own) {
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		setenv("LR_TEST_FAIL_PID", pid, 1);
		own = pid;
	}
	owner = (pid_t)atol(own);
	if (owner != getpid())
		return;
	p = strchr(spec, ':');
	if (!p || (size_t)(p - spec) >= sizeof(call))
		return;
	memcpy(call, spec, (size_t)(p - spec));
	err_no = atoi(p + 1);
	if ((p = strchr(p + 1, ':'))) {
		skip = atoi(p + 1);
		if ((p = strchr(p + 1, ':')))
			snprintf(file, sizeof(file), "%s", p + 1);
	}
	armed = 1;
}

/* Whether this call of name, in process who, is the one to fail (errno
 * then set). */
static int fails_in(const char *name, pid_t who)
{
	const char *mark;
	int e = errno;

	if (!armed || done || who != owner || strcmp(name, call) != 0)
		return 0;
	if (file[0] && access(file, F_OK) != 0) {
		errno = e;
		return 0;
	}
	if (skip > 0) {
		skip--;
		errno = e;
		return 0;
	}
	done = 1;
	if ((mark = getenv("LR_TEST_FAIL_MARK")))
		close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	errno = err_no;
	return 1;
}

static int fails(const char *name)
{
	return fails_in(name, getpid());
}

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (fails("poll"))
		return err_no ? -1 : 0;
	return NEXT(int (*)(struct pollfd *, nfds_t, int), "poll")(fds, n,
								   timeout);
}

int timerfd_create(int clockid, int flags)
{
	if (fails("timerfd_create"))
		return -1;
	return NEXT(int (*)(int, int), "timerfd_create")(clockid, flags);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (fails("send"))
		return -1;
	return NEXT(ssize_t (*)(int, const void *, size_t, int), "send")(
		fd, buf, len, flags);
}

int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	void *ptid, *tls, *ctid;

	if (fails("clone"))
		return -1;
	va_start(ap, arg);
	ptid = va_arg(ap, void *);
	tls = va_arg(ap, void *);
	ctid = va_arg(ap, void *);
	va_end(ap);
	return NEXT(int (*)(int (*)(void *), void *, int, void *, ...),
		    "clone")(fn, stack, flags, arg, ptid, tls, ctid);
}

/* (fork): the coverage build's gcov-dump.h makes fork() a macro. */
pid_t(fork)(void)
{
	if (fails("fork"))
		return -1;
	return NEXT(pid_t (*)(void), "fork")();
}

int signalfd(int fd, const sigset_t *mask, int flags)
{
	if (fails("signalfd"))
		return -1;
	return NEXT(int (*)(int, const sigset_t *, int), "signalfd")(fd, mask,
								     flags);
}

int pipe2(int p[2], int flags)
{
	if (fails("pipe2"))
		return -1;
	return NEXT(int (*)(int[2], int), "pipe2")(p, flags);
}

int chmod(const char *path, mode_t mode)
{
	if (fails("chmod"))
		return -1;
	return NEXT(int (*)(const char *, mode_t), "chmod")(path, mode);
}

int rename(const char *from, const char *to)
{
	if (fails("rename"))
		return -1;
	return NEXT(int (*)(const char *, const char *), "rename")(from, to);
}

int fsync(int fd)
{
	if (fails("fsync"))
		return -1;
	return NEXT(int (*)(int), "fsync")(fd);
}

int fdatasync(int fd)
{
	if (fails("fdatasync"))
		return -1;
	return NEXT(int (*)(int), "fdatasync")(fd);
}

ssize_t getrandom(void *buf, size_t len, unsigned flags)
{
	if (fails("getrandom"))
		return -1;
	return NEXT(ssize_t (*)(void *, size_t, unsigned), "getrandom")(
	    buf, len, flags);
}

/* flock: in the file store's helpers, children that leaserun forked and
 * did not exec (which keeps the shim armed), the flock() each blocks in;
 * leaserun's own flock() calls, and those of anything exec'd, go
 * through.  Each helper has its own copy of SKIP and of "once": every
 * helper's first blocking flock() after SKIP fails. */
int flock(int fd, int op)
{
	if (!(op & LOCK_NB) && getpid() != owner && fails_in("flock", getppid()))
		return -1;
	return NEXT(int (*)(int, int), "flock")(fd, op);
}

/*
 * child.c - fork/exec discipline for the command.
 *
 * The child gets its own process group (so the whole tree can be
 * signalled), PR_SET_PDEATHSIG(SIGKILL) checked against getppid() (so
 * kill -9 of leaserun cannot leave it running past the lease), an empty
 * signal mask, and only the fds that were open when leaserun started.
 * Signals leaserun inherited as ignored stay ignored, as with any exec.
 * Exec failures travel back on a close-on-exec pipe, as posix_spawn does.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "util.h"

static void close_from(unsigned lo, unsigned hi)
{
	if (lo > hi)
		return;
#ifdef HAVE_CLOSE_RANGE
	if (close_range(lo, hi, 0) == 0)
		return;
#endif
	for (; lo <= hi && lo < 65536; lo++)
		close((int)lo);
}

/* In the child: close every fd >= 3 but the kept ones (sorted) and
 * also, which is not among them. */
static void close_ours(const int *keep, size_t nkeep, int also)
{
	unsigned lo = 3;
	size_t i = 0;

	for (;;) {
		int fd;

		if (also >= 0 && (i == nkeep || also < keep[i])) {
			fd = also;
			also = -1;
		} else if (i < nkeep) {
			fd = keep[i++];
		} else {
			break;
		}
		if ((unsigned)fd > lo)
			close_from(lo, (unsigned)fd - 1);
		/* The user's fds lose FD_CLOEXEC only if they had it off. */
		lo = (unsigned)fd + 1;
	}
	close_from(lo, ~0U);
}

pid_t lr_child_spawn(const struct lr_child_spec *spec, int *code,
		     int *errnum)
{
	pid_t parent = getpid(), pid;
	int p[2], e = 0;
	ssize_t n;

	*code = 0;
	*errnum = 0;
	if (pipe2(p, O_CLOEXEC) < 0) {
		*code = LR_EXIT_FAILED;
		*errnum = errno;
		return -1;
	}
	/* vfork: no page tables to copy, which is most of a fork's cost;
	 * the child below makes system calls only (no locks, no malloc, no
	 * handlers: leaserun installs none) until it execs or exits, as
	 * glibc's posix_spawn does. */
	pid = vfork();
	if (pid < 0) {
		*code = LR_EXIT_FAILED;
		*errnum = errno;
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;

		close(p[0]);
		if (!spec->foreground)
			setpgid(0, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
		    getppid() != parent)
			_exit(LR_EXIT_FAILED);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* The exec pipe stays open until the exec closes it. */
		close_ours(spec->keep_fds, spec->nkeep, p[1]);
		execvpe(spec->argv[0], spec->argv, spec->envp);
		e = errno;
		if (write(p[1], &e, sizeof(e)) < 0) {
			/* the parent sees a short read and assumes 127 */
		}
		_exit(e == ENOENT || e == ENOTDIR ? LR_EXIT_NOTFOUND
						  : LR_EXIT_NOEXEC);
	}
	close(p[1]);
	if (!spec->foreground)
		setpgid(pid, pid); /* no race with our first kill(-pid) */
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == 0)
		return pid; /* exec succeeded: the pipe closed on exec */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	*errnum = n == sizeof(e) ? e : EIO;
	*code = *errnum == ENOENT || *errnum == ENOTDIR ? LR_EXIT_NOTFOUND
							: LR_EXIT_NOEXEC;
	return -1;
}

int lr_child_signal(pid_t pid, int foreground, int sig)
{
	return kill(foreground ? pid : -pid, sig);
}

int lr_child_group_alive(pid_t pid, int foreground)
{
	if (foreground)
		return 0;
	return kill(-pid, 0) == 0 || errno == EPERM;
}

/* The guard shares our memory (CLONE_VM: no page tables to copy, which is
 * most of a fork's cost) but has a copy of our fd table, so our death
 * closes our end of its pipe.  It runs only raw system calls on its own
 * stack: no libc state, no sanitizer bookkeeping. */
static struct {
	int rd, wr;
	pid_t pgid;
	char file[4200], tmp[4200], dir[4096]; /* "" when none */
} guard_arg;
static char guard_stack[16384] __attribute__((aligned(16)));
/* A guard told to stop and not waited for: it may still be on
 * guard_stack, so the next guard (a second run in one process, as the
 * unit tests make) waits for it first. */
static pid_t guard_leaving;

__attribute__((no_sanitize("address", "undefined")))
static int guard_main(void *unused)
{
	char c;
	long n;

	(void)unused;
	/* A group of its own: whoever SIGKILLs leaserun's whole group
	 * (timeout(1) does) must not take the guard along. */
	syscall(SYS_setpgid, 0, 0);
	syscall(SYS_close, guard_arg.wr);
	do
		n = syscall(SYS_read, guard_arg.rd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n <= 0) { /* we died */
		syscall(SYS_kill, -guard_arg.pgid, SIGKILL);
		if (guard_arg.dir[0]) {
			syscall(SYS_unlinkat, AT_FDCWD, guard_arg.file, 0);
			syscall(SYS_unlinkat, AT_FDCWD, guard_arg.tmp, 0);
			syscall(SYS_unlinkat, AT_FDCWD, guard_arg.dir,
				AT_REMOVEDIR);
		}
	}
	syscall(SYS_exit, 0);
	return 0;
}

pid_t lr_child_guard_start(pid_t pgid, const char *const rm[3], int *fd)
{
	pid_t guard;
	int p[2];

	*fd = -1;
	if (guard_leaving > 0) {
		while (waitpid(guard_leaving, NULL, 0) < 0 && errno == EINTR)
			;
		guard_leaving = 0;
	}
	guard_arg.dir[0] = guard_arg.file[0] = guard_arg.tmp[0] = '\0';
	if (rm && strlen(rm[0]) < sizeof(guard_arg.file) &&
	    strlen(rm[1]) < sizeof(guard_arg.tmp) &&
	    strlen(rm[2]) < sizeof(guard_arg.dir)) {
		strcpy(guard_arg.file, rm[0]);
		strcpy(guard_arg.tmp, rm[1]);
		strcpy(guard_arg.dir, rm[2]);
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	guard_arg.rd = p[0];
	guard_arg.wr = p[1];
	guard_arg.pgid = pgid;
	/* Our other fds stay open in the guard until the group is killed,
	 * so a lock file or a store session we held outlives it. */
	guard = clone(guard_main, guard_stack + sizeof(guard_stack),
		      CLONE_VM | SIGCHLD, NULL);
	close(p[0]);
	if (guard < 0) {
		close(p[1]);
		return -1;
	}
	setpgid(guard, guard); /* as it does itself: no window either way */
	*fd = p[1];
	return guard;
}

void lr_child_guard_stop(pid_t guard, int fd)
{
	if (guard <= 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (write(fd, "x", 1) != 1) {
		/* it is gone already */
	}
	close(fd);
	/* Not waited for: its exit closes its copies of our fds, and the
	 * last close of the file store's inotify fd waits for the kernel's
	 * SRCU grace period (milliseconds, seen up to 20ms).  It kills
	 * nothing now; whoever inherits it when we exit reaps it, or the
	 * next lr_child_guard_start(). */
	guard_leaving = guard;
}

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

/* The command's side of lr_child_spawn(), in the vfork()ed child: it
 * execs the command or exits, writing exec's errno to the pipe fd. */
static void __attribute__((noreturn))
exec_child(const struct lr_child_spec *spec, pid_t parent, int fd)
{
	sigset_t none;
	int e;

	if (!spec->foreground) {
		setpgid(0, 0);
		/* Before the exec: the command cannot start anything the
		 * guard would not know of. */
		lr_child_guard_group(getpid());
	}
	/* Our parent may have died before the prctl(): then nobody holds
	 * the lease for us. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(LR_EXIT_FAILED);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* The exec pipe stays open until the exec closes it. */
	close_ours(spec->keep_fds, spec->nkeep, fd);
	execvpe(spec->argv[0], spec->argv, spec->envp);
	e = errno;
	if (write(fd, &e, sizeof(e)) < 0) {
		/* the parent sees a short read and assumes 127 */
	}
	_exit(e == ENOENT || e == ENOTDIR ? LR_EXIT_NOTFOUND : LR_EXIT_NOEXEC);
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
		close(p[0]);
		exec_child(spec, parent, p[1]);
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
	if (!spec->foreground)
		lr_child_guard_group(0);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	*errnum = n == sizeof(e) ? e : EIO;
	*code = *errnum == ENOENT || *errnum == ENOTDIR ? LR_EXIT_NOTFOUND
							: LR_EXIT_NOEXEC;
	return -1;
}

/* A command's pid is never 0 or 1; kill() would take them for our own
 * group and for every process we may signal (all of them, as root). */
int lr_child_signal(pid_t pid, int foreground, int sig)
{
	if (pid < 2) {
		errno = ESRCH;
		return -1;
	}
	return kill(foreground ? pid : -pid, sig);
}

int lr_child_group_alive(pid_t pid, int foreground)
{
	if (foreground || pid < 2)
		return 0;
	return kill(-pid, 0) == 0 || errno == EPERM;
}

/* The group guard (child.h).  It shares our memory and our descriptor
 * table (CLONE_VM | CLONE_FILES: nothing is copied), so it holds every
 * descriptor we open, before or after it starts, and learns what to
 * kill and remove from plain stores to memory: no system call and no
 * wake-up while the lease is held.  It sleeps with every signal blocked
 * and wakes when we exit (PR_SET_PDEATHSIG); a signal someone else
 * sends finds getppid() unchanged and sends it back to sleep.  It runs
 * only raw system calls on its own stack: no libc state, no sanitizer
 * bookkeeping.  Each field is published with a release store, so what
 * it reads is whole; a path is published only once it is written out. */
static struct {
	pid_t parent;
	pid_t pgid;  /* the group to kill; 0: none */
	int files;   /* 1: remove file, tmp and dir */
	char file[4200], tmp[4200], dir[4096];
} guard_arg;
static char guard_stack[16384] __attribute__((aligned(16)));
static pid_t guard_pid;

__attribute__((no_sanitize("address", "undefined")))
static int guard_main(void *unused)
{
	unsigned long all = ~0UL;
	pid_t pgid;

	(void)unused;
	/* A group of its own: whoever SIGKILLs leaserun's whole group
	 * (timeout(1) does) must not take the guard along. */
	syscall(SYS_setpgid, 0, 0);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof(all));
	syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGHUP);
	/* Checked after the prctl: if we died before it, no signal comes,
	 * and getppid() already names someone else. */
	while (syscall(SYS_getppid) == guard_arg.parent)
		syscall(SYS_rt_sigtimedwait, &all, NULL, NULL, sizeof(all));
	/* Never 1 (nor less): kill(-1) is every process we may signal. */
	pgid = __atomic_load_n(&guard_arg.pgid, __ATOMIC_ACQUIRE);
	if (pgid > 1)
		syscall(SYS_kill, -pgid, SIGKILL);
	if (__atomic_load_n(&guard_arg.files, __ATOMIC_ACQUIRE)) {
		syscall(SYS_unlinkat, AT_FDCWD, guard_arg.file, 0);
		syscall(SYS_unlinkat, AT_FDCWD, guard_arg.tmp, 0);
		syscall(SYS_unlinkat, AT_FDCWD, guard_arg.dir, AT_REMOVEDIR);
	}
	/* Its exit closes the descriptors we left open (the lease goes only
	 * now) and frees our memory: after us, off the run's path. */
	syscall(SYS_exit, 0);
	return 0;
}

int lr_child_guard_start(void)
{
	pid_t guard;

	if (guard_pid > 0)
		return 0;
	guard_arg.parent = getpid();
	guard = clone(guard_main, guard_stack + sizeof(guard_stack),
		      CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
	if (guard < 0)
		return -1;
	setpgid(guard, guard); /* as it does itself: no window either way */
	guard_pid = guard;
	return 0;
}

void lr_child_guard_group(pid_t pgid)
{
	__atomic_store_n(&guard_arg.pgid, pgid, __ATOMIC_RELEASE);
}

void lr_child_guard_files(const char *const rm[3])
{
	__atomic_store_n(&guard_arg.files, 0, __ATOMIC_RELEASE);
	if (!rm || strlen(rm[0]) >= sizeof(guard_arg.file) ||
	    strlen(rm[1]) >= sizeof(guard_arg.tmp) ||
	    strlen(rm[2]) >= sizeof(guard_arg.dir))
		return;
	strcpy(guard_arg.file, rm[0]);
	strcpy(guard_arg.tmp, rm[1]);
	strcpy(guard_arg.dir, rm[2]);
	__atomic_store_n(&guard_arg.files, 1, __ATOMIC_RELEASE);
}

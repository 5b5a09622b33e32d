/* gcov-dump.h - included first in every file of the coverage build of
 * tests/mutate/run (gcc -include); not part of leaserun.
 *
 * Where: a process writes its coverage counts under $GCOV_PREFIX, which
 * tests/coverage.bash sets to the directory of the test that runs.  A
 * process started with a clean environment (setpriv --reset-env, env -i:
 * the tests of other users and of what the command inherits) has none;
 * LR_GCOV_CURRENT names a file where tests/coverage.bash writes the
 * running test's directory, and it is read just before the counts are
 * written (libgcov reads GCOV_PREFIX then), so that the command, which
 * is started long before, never sees the variable.
 *
 * When: a process writes its counts at exit().  Two ways out do not,
 * and would lose what the process ran: raise() of a fatal signal
 * (leaserun dies of its command's signal), and _exit() in a child made
 * by fork() (the file store's flockers).  Both write the counts first.
 * A child that shares its parent's memory (vfork(), clone() with
 * CLONE_VM: the command before its exec, the guard) must not: its counts
 * are already the parent's, and a dump would mark them written, so that
 * the parent's exit() would write nothing.  "owner" is the process whose
 * memory this is (one per file: each file's own copy is set by its
 * constructor and by its own fork()s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void __gcov_dump(void);

static pid_t lr_gcov_owner;

static void __attribute__((unused)) lr_gcov_where(void)
{
#ifdef LR_GCOV_CURRENT
	char buf[4096], *sp;
	ssize_t n;
	int fd;

	if (getenv("GCOV_PREFIX"))
		return;
	fd = open(LR_GCOV_CURRENT, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	sp = strchr(buf, ' ');
	if (!sp)
		return;
	*sp = '\0';
	setenv("GCOV_PREFIX", buf, 0);
	setenv("GCOV_PREFIX_STRIP", sp + 1, 0);
#endif
}

/* (atexit's handlers run before the destructors that write the counts) */
static void __attribute__((constructor, unused)) lr_gcov_own(void)
{
	lr_gcov_owner = getpid();
	atexit(lr_gcov_where);
}

static inline void __attribute__((unused)) lr_gcov_dump(void)
{
	if (lr_gcov_owner == getpid()) {
		lr_gcov_where();
		__gcov_dump();
	}
}

static inline pid_t __attribute__((unused)) lr_gcov_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		lr_gcov_owner = getpid();
	return pid;
}

#define fork() lr_gcov_fork()
#define _exit(code) (lr_gcov_dump(), _exit(code))
#define raise(sig) (lr_gcov_dump(), raise(sig))

/* gcov-dump.h - included first in every file of the coverage build of
 * tests/mutate/run (gcc -include); not part of leaserun.
 *
 * A process writes its coverage counts when it calls exit().  Two ways
 * out do not, and would lose what the process ran: raise() of a fatal
 * signal (leaserun dies of its command's signal), and _exit() in a child
 * made by fork() (the file store's flockers).  Both write the counts
 * first.  A child that shares its parent's memory (vfork(), clone() with
 * CLONE_VM: the command before its exec, the guard) must not: its counts
 * are already the parent's, and a dump would mark them written, so that
 * the parent's exit() would write nothing.  "owner" is the process whose
 * memory this is (one per file: each file's own copy is set by its
 * constructor and by its own fork()s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <signal.h>
#include <unistd.h>

extern void __gcov_dump(void);

static pid_t lr_gcov_owner;

static void __attribute__((constructor, unused)) lr_gcov_own(void)
{
	lr_gcov_owner = getpid();
}

static inline void __attribute__((unused)) lr_gcov_dump(void)
{
	if (lr_gcov_owner == getpid())
		__gcov_dump();
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

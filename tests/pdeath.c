/* pdeath.c - an LD_PRELOAD shim for one test of the child's start: it
 * holds the new child just before its PR_SET_PDEATHSIG until leaserun is
 * gone.  A parent that dies there is missed by the death signal, which
 * only fires on a death after it is set; the child's own getppid() check
 * is what keeps the command from starting with no leaserun over it.
 * Active only with LR_TEST_PDEATH_MARK set (the file it writes, holding
 * the child's pid, once the child is in that window).  Never installed. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef int prctl_fn(int, unsigned long, unsigned long, unsigned long,
		     unsigned long);
static prctl_fn *real_prctl;

/* Resolved in the parent: the child runs after vfork(), where a call
 * into the dynamic linker could take a lock the parent holds. */
__attribute__((constructor)) static void resolve(void)
{
	real_prctl = (prctl_fn *)dlsym(RTLD_NEXT, "prctl");
}

/* The child's pid into the mark file, then a wait of at most 5 s for the
 * parent to change: system calls only. */
static void hold(const char *mark)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	pid_t parent = getppid();
	char buf[24];
	int fd, n, i;

	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	fd = open(mark, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, buf, (size_t)n) < 0) {
			/* the test times out waiting for the mark */
		}
		close(fd);
	}
	for (i = 0; i < 500 && getppid() == parent; i++)
		nanosleep(&tick, NULL);
}

int prctl(int option, ...)
{
	unsigned long a[4];
	const char *mark = getenv("LR_TEST_PDEATH_MARK");
	va_list ap;
	int i;

	va_start(ap, option);
	for (i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_PDEATHSIG && a[0] == SIGKILL && mark)
		hold(mark);
	return real_prctl(option, a[0], a[1], a[2], a[3]);
}

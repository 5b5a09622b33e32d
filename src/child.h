/*
 * child.h - spawn the command, signal it, map how it ended.
 */
#ifndef LEASERUN_CHILD_H
#define LEASERUN_CHILD_H

#include <stddef.h>
#include <sys/types.h>

struct lr_child_spec {
	char *const *argv;   /* argv[0] is looked up in PATH */
	char *const *envp;   /* the whole environment of the command */
	int foreground;      /* stay in our process group */
	const int *keep_fds; /* fds >= 3 the user gave us: sorted, kept */
	size_t nkeep;
};

/* Forks and execs.  Returns the child's pid (its own process group
 * leader unless foreground), or -1 with *code = 126 (not executable),
 * 127 (not found) or 125 (fork failed) and *errnum set; then the child,
 * if any, has been reaped. */
pid_t lr_child_spawn(const struct lr_child_spec *spec, int *code,
		     int *errnum);

/* Sends sig to the child's group (or to the child alone in foreground
 * mode).  Returns 0, or -1 when nobody is left to receive it. */
int lr_child_signal(pid_t pid, int foreground, int sig);

/* 1 while any process is left in the child's group (always 0 in
 * foreground mode, where the group is ours). */
int lr_child_group_alive(pid_t pid, int foreground);

/* A guard is a fork of ours, outside the command's group and in a group
 * of its own (so that a kill of our whole group, as timeout(1) sends,
 * spares it), that SIGKILLs the command's group if we die without saying
 * goodbye (kill -9): PDEATHSIG reaches only the command itself, not what
 * it started.  Returns the guard's pid and sets *fd to our end of its
 * pipe, or returns -1.  Unless rm is NULL, the guard then also removes
 * the files rm[0] and rm[1] and the directory rm[2] (the command's state
 * file). */
pid_t lr_child_guard_start(pid_t pgid, const char *const rm[3], int *fd);
/* Says goodbye: the guard exits without killing, in its own time (not
 * waited for).  Accepts pid 0. */
void lr_child_guard_stop(pid_t guard, int fd);

#endif

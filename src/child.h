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

/* The group guard: PR_SET_PDEATHSIG reaches only the command's own
 * process, not what it started; the guard SIGKILLs the command's group
 * if we die without saying goodbye (kill -9), and removes the command's
 * state files.  It is a process outside the command's group, in a group
 * of its own (so that a kill of our whole group, as timeout(1) sends,
 * spares it), started once, early.  It shares our descriptor table, so
 * it keeps every descriptor we open, before or after its start, open
 * until it has killed the group: a lock or a session we held is let go
 * only then.  Returns 0, or -1 with errno. */
int lr_child_guard_start(void);
/* The group the guard kills if we die: lr_child_spawn() sets it, in the
 * child before its exec; 0 (once the group is gone): none.  A store to
 * memory, callable with no guard running. */
void lr_child_guard_group(pid_t pgid);
/* The files rm[0] and rm[1] and the directory rm[2] the guard removes if
 * we die; NULL: none.  A normal exit calls lr_child_guard_group(0) and
 * lr_child_guard_files(NULL): the guard then wakes when we are gone and
 * exits doing nothing. */
void lr_child_guard_files(const char *const rm[3]);

#endif

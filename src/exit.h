/*
 * exit.h - the exit-status policy (leaserun(1), EXIT STATUS): how each
 * way a run can end becomes leaserun's exit status.  timeout(1)'s family:
 * the command's own status, 124 when the run was not what was asked
 * (lease lost, --max-time), 125 leaserun's own failure, 126/127 the
 * command could not run.
 */
#ifndef LEASERUN_EXIT_H
#define LEASERUN_EXIT_H

/* How a run ended. */
enum lr_outcome {
	LR_OUT_CHILD,    /* child finished while the lease was held */
	LR_OUT_CONFLICT, /* not acquired */
	LR_OUT_LOST,     /* lease lost, child stopped */
	LR_OUT_FAILED,   /* leaserun failed */
	LR_OUT_TIMEOUT,  /* --max-time ran out, child stopped */
	LR_OUT_HELD_BACK, /* --once-per: a start less than the period ago */
};
#define LR_EXIT_LOST 124
#define LR_EXIT_TIMEOUT 124 /* as timeout(1) */
#define LR_EXIT_FAILED 125
#define LR_EXIT_NOEXEC 126
#define LR_EXIT_NOTFOUND 127

/* Returns the exit code for an outcome.  For LR_OUT_CHILD, wstatus is the
 * child's wait status: its exit code, or for a death by signal N the value
 * 128+N and *sig = N (the caller re-raises it).  *sig is 0 otherwise. */
int lr_exit_code(enum lr_outcome o, int wstatus, int conflict_code, int *sig);

#endif

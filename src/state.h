/*
 * state.h - what the command can learn about its lease without asking the
 * store: a small file that the loop rewrites on every change, named in
 * the command's environment as LEASERUN_STATE, and read by
 * `leaserun --check`.
 *
 * The file lives in a directory of its own (mkdtemp in $XDG_RUNTIME_DIR,
 * $TMPDIR or /tmp) and is replaced with rename(), so a reader sees one
 * whole version.  Lines are key=value:
 *
 *   name=nightly-invoices
 *   state=held           held, at-risk, stopping, releasing or lost
 *   fence=42
 *   pid=1234             leaserun's
 *   deadline=1796000000123             Unix ms: gone unless renewed by then
 *   deadline_boottime=123456789        the same on CLOCK_BOOTTIME
 */
#ifndef LEASERUN_STATE_H
#define LEASERUN_STATE_H

#include <stdint.h>

enum lr_lease_state {
	LR_ST_HELD,
	LR_ST_AT_RISK,
	LR_ST_STOPPING,
	LR_ST_RELEASING, /* the group is gone; the release has not answered */
	LR_ST_LOST,
};

/* Writes the state (creating the directory the first time).  0, or -1
 * with errno (the caller warns once; the command runs without it). */
int lr_state_write(const char *name, enum lr_lease_state st, uint64_t fence,
		   int64_t deadline_boot);
/* The file's path, or NULL before a successful write. */
const char *lr_state_path(void);
/* The directory and the file, for a guard that must remove them after
 * we are gone; valid for the life of the process. */
const char *lr_state_dir(void);
const char *lr_state_tmp(void);
/* Removes the file and its directory. */
void lr_state_remove(void);

/* --check: reads the file named by LEASERUN_STATE and prints one line
 * (or a JSON object).  Returns the exit status: 0 held, 1 not held (lost,
 * stopping, releasing, expired, ended), 125 no state to read. */
int lr_state_check(int json, int quiet);

#endif

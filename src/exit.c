/*
 * exit.c - the exit-status policy (see exit.h).
 */
#include "config.h"

#include <sys/wait.h>

#include "exit.h"

int lr_exit_code(enum lr_outcome o, int wstatus, int conflict_code, int *sig)
{
	*sig = 0;
	switch (o) {
	case LR_OUT_CHILD:
		if (WIFEXITED(wstatus))
			return WEXITSTATUS(wstatus);
		if (WIFSIGNALED(wstatus)) {
			*sig = WTERMSIG(wstatus);
			return 128 + *sig;
		}
		return LR_EXIT_FAILED;
	case LR_OUT_CONFLICT:
		return conflict_code;
	case LR_OUT_LOST:
		return LR_EXIT_LOST;
	case LR_OUT_FAILED:
		return LR_EXIT_FAILED;
	case LR_OUT_TIMEOUT:
		return LR_EXIT_TIMEOUT;
	case LR_OUT_HELD_BACK:
		return conflict_code;
	}
	return LR_EXIT_FAILED;
}

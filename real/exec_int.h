/* real/exec_int.h: what the executor's halves share: exec.c (the op
 * program, the iteration) and exec_optim.c (the optimizer step). Not for
 * other users: real/exec.h is the interface. */
#ifndef REAL_EXEC_INT_H
#define REAL_EXEC_INT_H

#include "real/exec.h"

/* This rank's failure: printed (file:line) and left in its heartbeat for
 * supervise and diagnose; -1. */
int exec_fail(const char *what, const char *file, int line);

/* The optimizer step (SOP_OPTIM): clipping, the NaN check, AdamW or LAMB. */
int exec_run_optim(exec_t *x);

#endif

/* real/rt_cpu.h: what the MPI communicators (comm_mpi.c) need from the CPU
 * runtime: a nonblocking request issued on a stream joins that stream, so
 * record/wait/join order it and the timers stamp its completion. */
#ifndef REAL_RT_CPU_H
#define REAL_RT_CPU_H

#include "real/rt.h"

#include <mpi.h>

/* Takes ownership of req (completed and freed by the runtime). */
int rt_cpu_add_request(rt_t *rt, int stream, MPI_Request req);

/* MPI_Waitall on n requests, the host's time blocked there added to
 * rt->comm_wait_ns; MPI's return code. */
int rt_cpu_wait(rt_t *rt, int n, MPI_Request *reqs);

#endif

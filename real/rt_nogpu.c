/* real/rt_nogpu.c: the GPU entry points of rt.h and comm.h in a build
 * without CUDA (compiled instead of rt_gpu.c, rt_gpu_kern.cu and
 * comm_nccl.c): no device, and creating one says how to get it. */
#include "real/comm.h"
#include "real/rt.h"

#include <stdio.h>

static const char no_cuda[] =
    "this build has no CUDA (configure with nvcc on the PATH or in /usr/local/cuda and -DMEGASIM_CUDA=ON)";

int rt_gpu_create(rt_t **rt, int device, const size_t plan[RT_NPOOLS], char *err, int errlen)
{
    *rt = NULL;
    snprintf(err, errlen, "%s", no_cuda);
    return -1;
}

int rt_gpu_count(void) { return 0; }

int comm_nccl_create(comm_t **c, rt_t *rt, int tp, int dp, int pp, char *err, int errlen)
{
    *c = NULL;
    snprintf(err, errlen, "%s", no_cuda);
    return -1;
}

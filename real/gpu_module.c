/* real/gpu_module.c: the program side of the GPU module (see gpu_module.h):
 * opens libmegasim_gpu.so on first use and defines the public GPU entry
 * points of real/rt.h and real/comm.h on top of it. */
#define _GNU_SOURCE /* readlink, RTLD_* */

#include "real/gpu_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const gpu_module_api_t *api;
static void *handle;
static char load_error[PATH_MAX + 512];

/* $MEGASIM_GPU_MODULE, else GPU_MODULE_FILE beside the program; 0 when
 * there is neither (a build without CUDA and no module named). */
static int module_path(char *path, size_t len)
{
    const char *env = getenv("MEGASIM_GPU_MODULE");
    if (env && *env) {
        snprintf(path, len, "%s", env);
        return 1;
    }
#ifndef MEGASIM_GPU_MODULE_BUILT
    return 0;
#else
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(path, len, "%s/%s", slash ? exe : ".", GPU_MODULE_FILE);
    return 1;
#endif
}

static void load(void)
{
    char path[PATH_MAX + 64];
    if (!module_path(path, sizeof path)) {
        snprintf(load_error, sizeof load_error,
                 "this megasim was built without CUDA (-DMEGASIM_CUDA=OFF, or no nvcc when configured)");
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "cannot open the GPU module: %s", dlerror());
        return;
    }
    const gpu_module_api_t *(*entry)(void);
    *(void **)&entry = dlsym(h, GPU_MODULE_ENTRY);
    const gpu_module_api_t *a = entry ? entry() : NULL;
    if (!a || a->abi != GPU_MODULE_ABI) {
        snprintf(load_error, sizeof load_error, "%s is not a megasim GPU module of this build (%s)", path,
                 a ? "interface version differs: rebuild" : "no entry point");
        dlclose(h);
        return;
    }
    api = a, handle = h; /* kept open for the process's life */
}

/* The module's table, opened once (thread-safe); NULL with the reason in
 * why when there is none. The path is $MEGASIM_GPU_MODULE when set, else
 * GPU_MODULE_FILE in the program's own folder. */
static const gpu_module_api_t *gpu_module_load(char *why, size_t len)
{
    pthread_once(&once, load);
    if (!api && why && len)
        snprintf(why, len, "%s", load_error);
    return api;
}

void *gpu_module_symbol(const char *name, char *why, size_t len)
{
    if (!gpu_module_load(why, len))
        return NULL;
    void *f = dlsym(handle, name);
    if (!f && why && len)
        snprintf(why, len, "the GPU module has no entry point %s: rebuild", name);
    return f;
}

/* ---- real/rt.h, real/comm.h ------------------------------------------- */

int rt_gpu_count(char *why, size_t len)
{
    const gpu_module_api_t *a = gpu_module_load(why, len);
    return a ? a->rt_gpu_count(why, len) : 0;
}

int rt_gpu_create(rt_t **rt, int device, const size_t plan[RT_NPOOLS], char *err, int errlen)
{
    const gpu_module_api_t *a = gpu_module_load(err, (size_t)errlen);
    *rt = NULL;
    return a ? a->rt_gpu_create(rt, device, plan, err, errlen) : -1;
}

int comm_nccl_create(comm_t **c, rt_t *rt, const comm_plan_t *p, char *err, int errlen)
{
    const gpu_module_api_t *a = gpu_module_load(err, (size_t)errlen);
    *c = NULL;
    return a ? a->comm_nccl_create(c, rt, p, err, errlen) : -1;
}

/* real/cudnn_attn_int.h: what real/cudnn_attn.c (the library, the plans,
 * the calls) and real/cudnn_attn_graph.c (the operation graphs) share. Not
 * for other users: real/cudnn_attn.h is the interface. */
#ifndef REAL_CUDNN_ATTN_INT_H
#define REAL_CUDNN_ATTN_INT_H
#include "real/cudnn_attn.h"

#include <cudnn_graph.h>
#include <stdbool.h>

typedef cudnnBackendDescriptor_t bd_t;

/* The library's entry points (their prototypes are cudnn_graph.h's). */
typedef struct {
    void *lib;
    __typeof__(cudnnGetVersion) *version;
    __typeof__(cudnnGetErrorString) *errstr;
    __typeof__(cudnnGetLastErrorString) *lasterr;
    __typeof__(cudnnCreate) *hcreate;
    __typeof__(cudnnDestroy) *hdestroy;
    __typeof__(cudnnSetStream) *set_stream;
    __typeof__(cudnnBackendCreateDescriptor) *create;
    __typeof__(cudnnBackendDestroyDescriptor) *destroy;
    __typeof__(cudnnBackendSetAttribute) *set;
    __typeof__(cudnnBackendGetAttribute) *get;
    __typeof__(cudnnBackendFinalize) *finalize;
    __typeof__(cudnnBackendExecute) *execute;
} api_t;

/* The tensors a call binds, by role; the by-value scalars keep their host
 * value in the plan. */
enum {
    R_Q, R_K, R_V, R_O, R_STATS, R_DO, R_DQ, R_DK, R_DV, R_SEED, R_OFFSET, /* the caller's */
    R_DQACC, R_SUM,                                                       /* the backward's workspace */
    R_SCALE, R_NEGINF, R_WINDOW, R_DROPSCALE, R_DROPINV, R_ONE,           /* by value (fp32) */
    R_COUNT
};
#define R_FIRST_VALUE R_SCALE

#define KEEP_MAX 224 /* descriptors one graph makes (the backward with every option: about 150) */

typedef struct {
    int bwd, B, T, NH, NKV, HS, window;
    float p;
} key_t_;

typedef struct {
    key_t_ key;
    bd_t plan;
    bd_t keep[KEEP_MAX]; /* every descriptor of the graph, destroyed with the plan */
    int nkeep;
    int64_t uid[R_COUNT]; /* 0: the role is not in the graph */
    float value[R_COUNT];
    long long ws_plan, ws_total; /* the engine's workspace; with the backward's own tensors */
    long long dqacc_at, sum_at;  /* the backward's fp32 dQ accumulator and D: byte offsets in the workspace */
    char desc[96];
} plan_t;

struct cudnn_attn {
    api_t a;
    cudnnHandle_t handle; /* or */
    bd_t devprop;
    plan_t *plans;
    int nplans, cap;
};

#define ALIGN 256
static inline long long align_up_ll(long long n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* A message into err (printf-style). */
void cudnn_attn_say(char *err, int errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* cuDNN's message for a failed call: the status and the library's last
 * error string (which names the check that failed); returns -1. */
int cudnn_attn_fail(const api_t *a, cudnnStatus_t st, const char *what, char *err, int errlen);

/* The operation graph of plan p's key (forward or backward), finalized,
 * its descriptors kept in p (p->uid and p->value filled by role); NULL
 * with a message. real/cudnn_attn_graph.c */
cudnnBackendDescriptor_t cudnn_attn_graph(const cudnn_attn_t *c, plan_t *p, char *err, int errlen);

#endif

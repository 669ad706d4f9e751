/* real/cudnn_attn.c: cuDNN's fused flash attention (see cudnn_attn.h):
 * the library opened at run time (every entry point of cudnn_graph.h's
 * backend API looked up in it), the plans (cuDNN's heuristics over the
 * graphs of real/cudnn_attn_graph.c, one kept per shape) and the calls. */
#include "real/cudnn_attn_int.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define say cudnn_attn_say
#define fail cudnn_attn_fail

void cudnn_attn_say(char *err, int errlen, const char *fmt, ...)
{
    if (!err || errlen <= 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)errlen, fmt, ap);
    va_end(ap);
}

int cudnn_attn_fail(const api_t *a, cudnnStatus_t st, const char *what, char *err, int errlen)
{
    char last[512] = "";
    if (a->lasterr)
        a->lasterr(last, sizeof last);
    say(err, errlen, "cuDNN: %s: %s%s%s", what, a->errstr ? a->errstr(st) : "error", last[0] ? " (" : "",
        last[0] ? last : "");
    if (last[0] && err && errlen > 1 && strlen(err) < (size_t)errlen - 1)
        strncat(err, ")", (size_t)errlen - strlen(err) - 1);
    return -1;
}

/* ---------- plans ---------- */

static void plan_free(const api_t *a, plan_t *p)
{
    if (p->plan)
        a->destroy(p->plan);
    for (int i = p->nkeep - 1; i >= 0; i--)
        a->destroy(p->keep[i]);
    memset(p, 0, sizeof *p);
}

/* Does the engine of cfg note non-deterministic results? */
static int nondeterministic(const api_t *a, bd_t cfg)
{
    bd_t engine = NULL;
    int64_t n = 0;
    int nd = 0;
    if (a->create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
        return 0;
    if (a->get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        if (a->get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                   &n, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n; i++)
                nd |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    }
    a->destroy(engine);
    return nd;
}

static int64_t engine_index(const api_t *a, bd_t cfg)
{
    bd_t engine = NULL;
    int64_t n = 0, idx = -1;
    if (a->create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
        return -1;
    if (a->get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) ==
        CUDNN_STATUS_SUCCESS)
        a->get(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx);
    a->destroy(engine);
    return idx;
}

/* The engine configurations the heuristics suggest for graph, best first;
 * *n of them (the caller destroys each). */
#define MAX_CFG 32
static int suggest(const cudnn_attn_t *c, bd_t graph, cudnnBackendHeurMode_t mode, bd_t *cfg, int64_t *n, char *err,
                   int errlen)
{
    const api_t *a = &c->a;
    bd_t heur = NULL;
    *n = 0;
    if (a->create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS)
        return -1;
    cudnnStatus_t st = a->set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (st == CUDNN_STATUS_SUCCESS && c->devprop)
        st = a->set(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->devprop);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->finalize(heur);
    int made = 0;
    for (; st == CUDNN_STATUS_SUCCESS && made < MAX_CFG; made++)
        st = a->create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[made]);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CFG, n, cfg);
    if (st != CUDNN_STATUS_SUCCESS)
        fail(a, st, "engine heuristics", err, errlen), *n = 0;
    for (int i = (int)*n; i < made; i++)
        a->destroy(cfg[i]);
    a->destroy(heur);
    return st == CUDNN_STATUS_SUCCESS ? 0 : -1;
}

/* The first configuration whose plan finalizes, a deterministic one first
 * when any finalizes (the backward's atomics: cuDNN notes them). */
static int choose(const cudnn_attn_t *c, plan_t *p, bd_t graph, char *err, int errlen)
{
    const api_t *a = &c->a;
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    char why[512] = "no engine configuration suggested";
    int skipped = 0; /* non-deterministic configurations passed over */
    for (int pass = 0; pass < 1 + (skipped > 0) && !p->plan; pass++) /* pass 0: deterministic engines only */
        for (int mi = 0; mi < 2 && !p->plan; mi++) {
            bd_t cfg[MAX_CFG];
            int64_t n = 0;
            if (suggest(c, graph, modes[mi], cfg, &n, why, sizeof why))
                continue;
            for (int64_t i = 0; i < n; i++) {
                bd_t plan = NULL;
                int nd = nondeterministic(a, cfg[i]);
                if (nd && pass == 0) {
                    skipped++;
                    continue;
                }
                if (a->create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan))
                    continue;
                cudnnStatus_t st = a->set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
                if (st == CUDNN_STATUS_SUCCESS)
                    st = c->handle ? a->set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                               &c->handle)
                                      : a->set(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->devprop);
                if (st == CUDNN_STATUS_SUCCESS)
                    st = a->finalize(plan);
                int64_t got = 0, ws = 0;
                if (st == CUDNN_STATUS_SUCCESS)
                    st = a->get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws);
                if (st != CUDNN_STATUS_SUCCESS) {
                    fail(a, st, "finalizing an execution plan", why, sizeof why);
                    a->destroy(plan);
                    continue;
                }
                p->plan = plan, p->ws_plan = ws;
                snprintf(p->desc, sizeof p->desc, "engine %lld (%s, %s), workspace %lld B",
                         (long long)engine_index(a, cfg[i]), mi ? "fallback" : "heuristics A",
                         nd ? "non-deterministic" : "deterministic", (long long)ws);
                break;
            }
            for (int64_t i = 0; i < n; i++)
                a->destroy(cfg[i]);
        }
    if (!p->plan)
        say(err, errlen, "no cuDNN engine runs this attention graph: %s", why);
    return p->plan ? 0 : -1;
}

static int build(cudnn_attn_t *c, plan_t *p, char *err, int errlen)
{
    bd_t graph = cudnn_attn_graph(c, p, err, errlen);
    if (!graph || choose(c, p, graph, err, errlen))
        return -1;
    p->ws_total = p->dqacc_at = align_up_ll(p->ws_plan);
    if (p->key.bwd) { /* the fp32 dQ accumulator and D, in the workspace after the engine's */
        p->sum_at = p->dqacc_at + align_up_ll((long long)p->key.B * p->key.NH * p->key.T * p->key.HS * 4);
        p->ws_total = p->sum_at + align_up_ll((long long)p->key.B * p->key.NH * p->key.T * 4);
    }
    return 0;
}

/* ---------- the library ---------- */

static int load(api_t *a, char *err, int errlen)
{
    const char *path = getenv("MEGASIM_CUDNN_LIB");
    if (!path || !*path)
        path = "libcudnn.so.9";
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        say(err, errlen, "cannot open cuDNN (%s): %s; install cuDNN 9 or name the library in MEGASIM_CUDNN_LIB", path,
            dlerror());
        return -1;
    }
#define SYM(field, name)                                                                                         \
    if (!(*(void **)&a->field = dlsym(a->lib, #name))) {                                                        \
        say(err, errlen, "%s has no %s: cuDNN 9 is needed", path, #name);                                         \
        return -1;                                                                                               \
    }
    SYM(version, cudnnGetVersion)
    SYM(errstr, cudnnGetErrorString)
    SYM(lasterr, cudnnGetLastErrorString)
    SYM(hcreate, cudnnCreate)
    SYM(hdestroy, cudnnDestroy)
    SYM(set_stream, cudnnSetStream)
    SYM(create, cudnnBackendCreateDescriptor)
    SYM(destroy, cudnnBackendDestroyDescriptor)
    SYM(set, cudnnBackendSetAttribute)
    SYM(get, cudnnBackendGetAttribute)
    SYM(finalize, cudnnBackendFinalize)
    SYM(execute, cudnnBackendExecute)
#undef SYM
    if (a->version() < 90000) {
        say(err, errlen, "%s is cuDNN %zu; cuDNN 9 is needed", path, a->version());
        return -1;
    }
    return 0;
}

cudnn_attn_t *cudnn_attn_open(const char *devprop_json, char *err, int errlen)
{
    cudnn_attn_t *c = calloc(1, sizeof *c);
    if (!c) {
        say(err, errlen, "out of memory");
        return NULL;
    }
    if (load(&c->a, err, errlen)) {
        cudnn_attn_close(c);
        return NULL;
    }
    cudnnStatus_t st;
    if (!devprop_json) {
        if ((st = c->a.hcreate(&c->handle)) != CUDNN_STATUS_SUCCESS) {
            c->handle = NULL;
            fail(&c->a, st, "cudnnCreate", err, errlen);
            cudnn_attn_close(c);
            return NULL;
        }
        return c;
    }
    if ((st = c->a.create(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &c->devprop)) != CUDNN_STATUS_SUCCESS ||
        (st = c->a.set(c->devprop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                       (int64_t)strlen(devprop_json), devprop_json)) != CUDNN_STATUS_SUCCESS ||
        (st = c->a.finalize(c->devprop)) != CUDNN_STATUS_SUCCESS) {
        fail(&c->a, st, "the device description", err, errlen);
        cudnn_attn_close(c);
        return NULL;
    }
    return c;
}

void cudnn_attn_close(cudnn_attn_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nplans; i++)
        plan_free(&c->a, &c->plans[i]);
    free(c->plans);
    if (c->devprop)
        c->a.destroy(c->devprop);
    if (c->handle)
        c->a.hdestroy(c->handle);
    if (c->a.lib)
        dlclose(c->a.lib);
    free(c);
}

long cudnn_attn_version(const cudnn_attn_t *c) { return (long)c->a.version(); }

int cudnn_attn_supported(const kern_attn_shape *s, char *why, int n)
{
    if (kern_attn_tk(s) != s->T || s->q0 || s->k0 || kern_attn_tseq(s) != s->T)
        return say(why, n, "a block of a sequence (context parallelism) runs megasim's kernels"), -1;
    if (s->HS % 8 || s->HS > 256)
        return say(why, n, "head size %d: cuDNN's fused attention takes multiples of 8 up to 256", s->HS), -1;
    if (s->NKV <= 0 || s->NH % s->NKV)
        return say(why, n, "%d query heads over %d KV heads", s->NH, s->NKV), -1;
    return 0;
}

static plan_t *find(cudnn_attn_t *c, int bwd, const kern_attn_shape *s, char *err, int errlen)
{
    key_t_ key = {bwd, s->B, s->T, s->NH, s->NKV, s->HS, s->window > 0 && s->window < s->T ? s->window : 0,
                  s->drop.p};
    for (int i = 0; i < c->nplans; i++)
        if (!memcmp(&c->plans[i].key, &key, sizeof key))
            return &c->plans[i];
    if (cudnn_attn_supported(s, err, errlen))
        return NULL;
    if (c->nplans == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        plan_t *np = realloc(c->plans, (size_t)cap * sizeof *np);
        if (!np)
            return say(err, errlen, "out of memory"), NULL;
        c->plans = np, c->cap = cap;
    }
    plan_t *p = &c->plans[c->nplans];
    memset(p, 0, sizeof *p);
    p->key = key;
    if (build(c, p, err, errlen)) {
        plan_free(&c->a, p);
        return NULL;
    }
    c->nplans++;
    return p;
}

long long cudnn_attn_plan(cudnn_attn_t *c, int bwd, const kern_attn_shape *s, char *desc, int desclen, char *err,
                          int errlen)
{
    plan_t *p = find(c, bwd, s, err, errlen);
    if (p && desc)
        say(desc, desclen, "%s", p->desc);
    return p ? p->ws_total : -1;
}

void cudnn_attn_rng(const kern_attn_shape *s, int64_t seed_offset[2])
{
    const kern_dropout *d = &s->drop;
    uint64_t x = ((uint64_t)d->seed_hi << 32 | d->seed_lo) ^ ((uint64_t)d->site * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)d->step << 40);
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 27; /* splitmix64's finish: nearby inputs far apart */
    seed_offset[0] = (int64_t)(x & 0x7fffffffffffffffull);
    seed_offset[1] = (int64_t)kern_attn_drop_index(s, 0, 0, 0, 0);
}

/* Binds the pointers by role and runs the plan. */
static int run(cudnn_attn_t *c, plan_t *p, void *stream, void *const ptr[R_COUNT], void *ws, char *err, int errlen)
{
    const api_t *a = &c->a;
    if (!c->handle)
        return say(err, errlen, "cuDNN attention was opened to plan only (a device description, no GPU)"), -1;
    int64_t uids[R_COUNT];
    void *ptrs[R_COUNT];
    int n = 0;
    for (int r = 0; r < R_COUNT; r++)
        if (p->uid[r]) {
            uids[n] = p->uid[r];
            ptrs[n++] = r >= R_FIRST_VALUE ? (void *)&p->value[r] : ptr[r];
        }
    void *wsp = ws;
    bd_t vp = NULL;
    cudnnStatus_t st = a->set_stream(c->handle, (cudaStream_t)stream);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->finalize(vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = a->execute(c->handle, p->plan, vp);
    if (vp)
        a->destroy(vp);
    return st == CUDNN_STATUS_SUCCESS ? 0 : fail(a, st, p->key.bwd ? "attention backward" : "attention forward", err,
                                                 errlen);
}

int cudnn_attn_fwd(cudnn_attn_t *c, void *stream, void *out, float *lse, const void *q, const void *k, const void *v,
                   const kern_attn_shape *s, const int64_t *rng, void *ws, char *err, int errlen)
{
    plan_t *p = find(c, 0, s, err, errlen);
    if (!p)
        return -1;
    void *ptr[R_COUNT] = {0};
    ptr[R_Q] = (void *)q, ptr[R_K] = (void *)k, ptr[R_V] = (void *)v, ptr[R_O] = out, ptr[R_STATS] = lse;
    ptr[R_SEED] = (void *)rng, ptr[R_OFFSET] = rng ? (void *)(rng + 1) : NULL;
    return run(c, p, stream, ptr, ws, err, errlen);
}

int cudnn_attn_bwd(cudnn_attn_t *c, void *stream, void *dq, void *dk, void *dv, const void *dout, const void *q,
                   const void *k, const void *v, const void *out, const float *lse, const kern_attn_shape *s,
                   const int64_t *rng, void *ws, char *err, int errlen)
{
    plan_t *p = find(c, 1, s, err, errlen);
    if (!p)
        return -1;
    void *ptr[R_COUNT] = {0};
    char *w = ws;
    ptr[R_Q] = (void *)q, ptr[R_K] = (void *)k, ptr[R_V] = (void *)v, ptr[R_O] = (void *)out;
    ptr[R_STATS] = (void *)lse, ptr[R_DO] = (void *)dout, ptr[R_DQ] = dq, ptr[R_DK] = dk, ptr[R_DV] = dv;
    ptr[R_SEED] = (void *)rng, ptr[R_OFFSET] = rng ? (void *)(rng + 1) : NULL;
    ptr[R_DQACC] = w + p->dqacc_at, ptr[R_SUM] = w + p->sum_at;
    return run(c, p, stream, ptr, ws, err, errlen);
}

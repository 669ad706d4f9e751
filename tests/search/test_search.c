/* test_search: `megasim search` (model/search.h, cmd/search.c).
 *   count           the enumerator's counts on a small case, worked out by hand
 *   valid MEGASIM   every plan the CLI returns passes the job's rules and fits
 *   brute MEGASIM   the CLI's top plan is the best of a brute force over the
 *                   simulator (every valid plan simulated)
 *   fixed MEGASIM   a plan field set in a job file is fixed as the same flag
 *                   fixes it, and the output's configuration says which */
#define _POSIX_C_SOURCE 200809L /* popen */
#include "model/search.h"
#include "sim/engine.h"
#include "sim/output.h"
#include "../check.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* 4 layers, 8 heads, 8 GPUs (one node), batch 16: a space small enough to
 * count by hand. */
#define SMALL "--preset megatron-lm --num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 256 " \
              "--padded-vocab-size 1024 --num-gpus 8 --global-batch-size 16"
/* 8 layers, h 1024, 16 GPUs (two nodes), batch 32, MegaScale techniques:
 * a case where the plans differ by more than host overheads. */
#define BRUTE "--preset megascale --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 " \
              "--padded-vocab-size 8192 --num-gpus 16 --global-batch-size 32"

static int split(char *args, char **argv)
{
    int argc = 0;
    for (char *s = strtok(args, " "); s; s = strtok(NULL, " "))
        argv[argc++] = s;
    return argc;
}

/* The base job of a search (plan fields left to the space). */
static int space_from(const char *args, search_space_t *s, double limit_gib, int fix_overlaps)
{
    static char buf[2048];
    char *argv[64], err[OPT_ERR_LEN];
    snprintf(buf, sizeof buf, "%s", args);
    int argc = split(buf, argv);
    job_t job;
    hw_t hw;
    search_fixed_t fixed = {.ovl = fix_overlaps};
    if (job_parse(&job, argc, argv, NULL, NULL, err) || job_hardware(&job, &hw, err) ||
        search_space_init(s, &job, &hw, &fixed, 0, 0, 0, (limit_gib > 0 ? limit_gib : hw.gpu.hbm_gib) * 1073741824.0,
                          err)) {
        printf("FAIL setting up %s: %s\n", args, err);
        return -1;
    }
    return 0;
}

/* Hand count for SMALL (heads 8, layers 4, 8 GPUs, batch 16):
 *   (TP, SP): TP in {1,2,4,8} (divisors of 8 up to 8), SP only when TP > 1:
 *             1 + 2 + 2 + 2 = 7
 *   (PP, v, split): even: PP 1 (v 1), PP 2 (2 layers a stage: v 1 or 2),
 *             PP 4 (v 1): 4; the embedding and the loss counted as layers
 *             (6 slots, PP > 1): PP 2 (3 a stage: v 1 or 3), PP 3 (2: v 1
 *             or 2), PP 6 (v 1): 5; 9 in all
 *   total = 7 x 9 x 8 micro-batches x 4 ZeRO x 3 recompute = 6048
 *   gpus:  TP x PP must divide 8. Even: (8,2), (4,4), (8,4) fail, each with
 *          SP on/off, PP 2 with 2 chunk choices: (2x2 + 2 + 2) = 8; counted:
 *          PP 3 and 6 with every (TP, SP), 3 x 7 = 21, and TP 8 x PP 2
 *          (v 1, 3) x SP on/off, 4: 25. (8 + 25) x 8 mb x 12 = 3168
 *   batch: mb x DP must divide 16. DP 8: mb 1,2 pass; DP 4: 1,2,4; DP 2 or
 *          1: 1,2,4,8. Failing mb x weight ((SP, v) variants):
 *          PP1: TP1 DP8 6x1 + TP2 DP4 5x2 + TP4 DP2 4x2 + TP8 DP1 4x2 = 32
 *          PP2: TP1 DP4 5x2 + TP2 DP2 4x4 + TP4 DP1 4x4            = 42
 *          PP4: TP1 DP2 4x1 + TP2 DP1 4x2                          = 12
 *          counted PP2 (v 1, 3): the even PP2's again                = 42
 *          128 x 12 = 1536
 *   interleave (PP 2 with v 2, or counted v 3): micro-batches 16 / (mb DP)
 *          must be even: TP1 DP4 mb 4 (m = 1) x1 SP + TP2 DP2 mb 8 (m = 1)
 *          x2 SP = 3 each; 6 x 12 = 72
 *   zero3_pp: the rest with PP > 1 and ZeRO 3, x 3 recompute:
 *          PP2 v1: 3 + 8 + 8, PP2 v2: 2 + 6 + 8, PP4: 4 + 8 = 47; counted
 *          PP2 v1 19 and v3 16: 82; x 3 = 246
 *   ok: 6048 - 3168 - 1536 - 72 - 246 = 1026 (the model is tiny: all fit;
 *       the counted split's chunks of no layer are priced, not refused) */
static int test_count(void)
{
    static search_space_t s;
    if (space_from(SMALL, &s, 0, 1))
        return 1;
    long long n[SEARCH_NREASONS] = {0};
    job_t job;
    for (long long i = 0; i < s.total; i++) {
        search_row_t r;
        n[search_eval(&s, i, &r, &job, NULL)]++;
    }
    const char *src = "hand count, comment above test_count";
    check_rel("plans in the space", 6048, (double)s.total, 0, src);
    check_rel("rejected: TP x PP does not divide 8 GPUs", 3168, (double)n[SEARCH_REJ_GPUS], 0, src);
    check_rel("rejected: batch 16 not divisible by mb x DP", 1536, (double)n[SEARCH_REJ_BATCH], 0, src);
    check_rel("rejected: interleaved, micro-batches odd", 72, (double)n[SEARCH_REJ_INTERLEAVE], 0, src);
    check_rel("rejected: ZeRO-3 with PP > 1", 246, (double)n[SEARCH_REJ_ZERO3_PP], 0, src);
    check_rel("valid and fit", 1026, (double)n[SEARCH_OK], 0, src);
    check_rel("rejected otherwise (TP split, other rules, memory)", 0,
              (double)(n[SEARCH_REJ_TP] + n[SEARCH_REJ_OTHER] + n[SEARCH_REJ_MEMORY]), 0, src);
    /* With the overlap switches free, each valid plan above comes in
     * 2^k variants, k = the switches with something to overlap (TP needs
     * TP > 1 with SP, PP needs PP > 1, DP needs DP > 1); the rest are the
     * same plan again, rejected as "no effect". */
    long long expect = 0;
    for (long long i = 0; i < s.total; i++) {
        search_row_t r;
        if (search_eval(&s, i, &r, &job, NULL) == SEARCH_OK)
            expect += 1LL << ((job.tp > 1 && job.sequence_parallel) + (job.pp > 1) + (job.dp > 1));
    }
    static search_space_t free_s;
    if (space_from(SMALL, &free_s, 0, 0))
        return 1;
    long long ok = 0;
    for (long long i = 0; i < free_s.total; i++) {
        search_row_t r;
        ok += search_eval(&free_s, i, &r, &job, NULL) == SEARCH_OK;
    }
    check_rel("overlaps free: plans in the space", 6048.0 * 8, (double)free_s.total, 0, "6048 x 8 switch combinations");
    check_rel("overlaps free: valid plans", (double)expect, (double)ok, 0, "sum over the 1026 of 2^(switches that apply)");
    return check_done("search_enumerate_count");
}

/* Runs `megasim search ARGS --json` and parses the array. */
static cJSON *run_search(const char *megasim, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s search %s --json 2>/dev/null", megasim, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += k;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    int rc = pclose(p);
    if (!buf || rc) {
        printf("FAIL %s exited with %d\n", cmd, rc);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    cJSON *a = cJSON_Parse(buf);
    free(buf);
    return a;
}

/* The plan object back into flags, appended to the base arguments. */
static int plan_args(const char *base, const cJSON *plan, char *out, size_t len)
{
    int k = snprintf(out, len, "%s", base);
    for (const cJSON *f = plan->child; f; f = f->next) {
        if (!strcmp(f->string, "data-parallel-size"))
            continue;
        if (cJSON_IsBool(f))
            k += snprintf(out + k, len - k, " --%s=%s", f->string, cJSON_IsTrue(f) ? "true" : "false");
        else if (cJSON_IsString(f))
            k += snprintf(out + k, len - k, " --%s %s", f->string, f->valuestring);
        else
            k += snprintf(out + k, len - k, " --%s %d", f->string, f->valueint);
    }
    return k < (int)len ? 0 : -1;
}

/* Every returned plan: parsed back through job_parse, it passes
 * job_finalize, fits under the limit, and predicts the same MFU. */
static int test_valid(const char *megasim)
{
    const char *base = SMALL, *limit = "--memory-limit-gib 2.56";
    char args[1024];
    snprintf(args, sizeof args, "%s %s --top 100000", base, limit);
    cJSON *a = run_search(megasim, args);
    if (!check_true("search --json gives an array", cJSON_IsArray(a), args))
        return check_done("search_valid_and_fits");
    int n = cJSON_GetArraySize(a), bad = 0, over = 0, differ = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(a, i);
        char flags[2048], *argv[64], err[OPT_ERR_LEN];
        job_t job;
        hw_t hw;
        if (plan_args(base, cJSON_GetObjectItem(o, "plan"), flags, sizeof flags))
            return check_true("plan flags fit the buffer", 0, "");
        int argc = split(flags, argv);
        if (job_parse(&job, argc, argv, NULL, NULL, err) || job_hardware(&job, &hw, err) ||
            job_finalize(&job, hw.cluster.gpus_per_node, err)) {
            if (bad++ < 3)
                printf("     plan %d invalid: %s\n", i + 1, err);
            continue;
        }
        estimate_t e;
        estimate_job(&job, &hw, &e);
        over += e.mem.total_bytes > 2.56 * 1073741824.0;
        double want = cJSON_GetObjectItem(o, "mfu")->valuedouble;
        /* cJSON prints 15 significant digits when they read back within
         * its epsilon: compare to 1e-14 relative. */
        if (fabs(e.mfu - want) > 1e-14 * fabs(want) && differ++ < 3)
            printf("     plan %d: search MFU %.17g, predict %.17g\n", i + 1, want, e.mfu);
    }
    char detail[160];
    snprintf(detail, sizeof detail, "%d plans returned under %s", n, limit);
    check_true("returned plans (all of them)", n > 100, detail);
    check_rel("plans failing job_finalize", 0, bad, 0, "every returned plan must be valid");
    check_rel("plans above 2.56 GiB per GPU", 0, over, 0, "--memory-limit-gib 2.56");
    check_rel("plans whose predict MFU differs from the search's", 0, differ, 0, "same closed form, same plan");
    cJSON_Delete(a);
    return check_done("search_valid_and_fits");
}

/* Brute force: every valid plan of BRUTE simulated (folded); the best
 * simulated MFU must be the CLI's top plan's (closed form ranks, top 10
 * re-ranked by the simulator). */
static int test_brute(const char *megasim)
{
    static search_space_t s;
    if (space_from(BRUTE, &s, 6, 0))
        return 1;
    static sim_opts_t o;
    o.fold = 1;
    double best = -1;
    long long best_i = -1, nvalid = 0, nfailed = 0;
    for (long long i = 0; i < s.total; i++) {
        job_t job;
        estimate_t e;
        search_row_t r;
        result_t res;
        sim_summary_t sum;
        char err[OPT_ERR_LEN];
        if (search_eval(&s, i, &r, &job, &e) != SEARCH_OK)
            continue;
        nvalid++;
        if (sim_run(&job, &s.hw, &o, &res, err, sizeof err)) {
            if (!nfailed++)
                printf("     the first plan the simulator refused: %s\n", err);
            continue;
        }
        sim_summary(&job, &e, &res, &sum);
        if (sum.mfu > best)
            best = sum.mfu, best_i = i;
        result_free(&res);
    }
    char detail[96];
    snprintf(detail, sizeof detail, "%lld of %lld valid plans simulated", nvalid - nfailed, nvalid);
    if (!check_true("the brute force simulated every valid plan", nvalid > 0 && nfailed == 0, detail))
        return check_done("search_top_matches_brute_force");
    cJSON *a = run_search(megasim, BRUTE " --memory-limit-gib 6 --top 1");
    const cJSON *sim = cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "simulated");
    const cJSON *mfu = cJSON_GetObjectItem(sim, "mfu");
    if (!check_true("the search printed a simulated top plan", cJSON_IsNumber(mfu), "simulated.mfu in --json"))
        return cJSON_Delete(a), check_done("search_top_matches_brute_force");
    double got = mfu->valuedouble;
    search_plan_t p;
    search_plan_at(&s, best_i, &p);
    char src[256];
    snprintf(src, sizeof src, "brute force over %lld valid plans; best TP%d PP%d lpv%d mb%d SP%d ZeRO%d rc%d", nvalid,
             p.tp, p.pp, p.lpv, p.mb, p.sp, p.zero, p.recompute);
    check_rel("simulated MFU of the search's top plan", best, got, 1e-12, src); /* JSON: 15 digits */
    cJSON_Delete(a);
    return check_done("search_top_matches_brute_force");
}

/* `megasim search ARGS`'s "space: N plans" line; -1 when absent. */
static long long space_count(const char *megasim, const char *args)
{
    char cmd[4096], line[512];
    long long n = -1;
    snprintf(cmd, sizeof cmd, "%s search %s --rerank 0 --top 1 2>/dev/null", megasim, args);
    FILE *p = popen(cmd, "r");
    while (p && fgets(line, sizeof line, p))
        if (sscanf(line, "space: %lld plans", &n) == 1)
            break;
    while (p && fgets(line, sizeof line, p))
        ;
    if (p && pclose(p))
        n = -1;
    return n;
}

/* The "fixed_plan_fields" of the top plan's configuration, as one string. */
static void fixed_list(const char *megasim, const char *args, char *out, size_t len)
{
    cJSON *a = run_search(megasim, args);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "config");
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "search"), "fixed_plan_fields");
    int k = snprintf(out, len, "%s", f ? "[" : "(missing)");
    for (const cJSON *e = f ? f->child : NULL; e && cJSON_IsString(e); e = e->next)
        k += snprintf(out + k, len - k > 0 ? len - k : 0, "%s%s", e == f->child ? "" : " ", e->valuestring);
    if (f)
        snprintf(out + k, len - k > 0 ? len - k : 0, "]");
    cJSON_Delete(a);
}

/* A job file that sets tensor-model-parallel-size fixes it as the flag
 * does (the help: job files hold the same fields as the flags); a preset's
 * or the default's value leaves it searched. By test_count's hand count,
 * SMALL has 7 (TP, SP) pairs, and TP fixed at 2 leaves 2 (SP off, on). */
static int test_fixed(const char *megasim)
{
    const char *file = "search_fixed_tp2.json";
    FILE *f = fopen(file, "w");
    if (!f || fputs("{\"tensor_model_parallel_size\": 2}\n", f) < 0 || fclose(f)) {
        printf("FAIL cannot write %s\n", file);
        return 1;
    }
    long long none = space_count(megasim, SMALL);
    long long flag = space_count(megasim, SMALL " --tensor-model-parallel-size 2");
    long long json = space_count(megasim, SMALL " search_fixed_tp2.json");
    check_true("the search ran (space line printed, 3 runs)", none > 0 && flag > 0 && json > 0, "");
    check_rel("plans with TP fixed by the flag", none * 2.0 / 7.0, (double)flag, 0,
              "space without it x 2/7: hand count of (TP, SP) pairs");
    check_rel("plans with TP fixed by a job file", (double)flag, (double)json, 0, "the same flag's count");
    char got[512];
    fixed_list(megasim, SMALL " search_fixed_tp2.json --micro-batch-size 1", got, sizeof got);
    check_true("configuration's fixed plan fields (file + flag)",
               !strcmp(got, "[tensor-model-parallel-size micro-batch-size]"),
               "expected [tensor-model-parallel-size micro-batch-size]");
    printf("     got %s\n", got);
    fixed_list(megasim, SMALL, got, sizeof got);
    check_true("configuration's fixed plan fields (preset only)", !strcmp(got, "[]"), "expected []");
    printf("     got %s\n", got);
    remove(file);
    return check_done("search_job_file_fixes_plan_fields");
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "count"))
        return test_count();
    if (argc == 3 && !strcmp(argv[1], "valid"))
        return test_valid(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "brute"))
        return test_brute(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "fixed"))
        return test_fixed(argv[2]);
    fprintf(stderr, "usage: test_search count | valid MEGASIM | brute MEGASIM | fixed MEGASIM\n");
    return 2;
}

/* tests/real/test_cudnn_attn.c: cuDNN's fused attention graphs
 * (real/cudnn_attn.c) planned on this machine for an H100 described by
 * tests/real/data/h100-sxm-deviceprop.json (cuDNN's device description:
 * the H100 SXM's cudaDeviceProp values, from NVIDIA's H100 data sheet and
 * the CUDA programming guide's compute capability 9.0 limits), no GPU
 * needed: every graph must finalize, and cuDNN's heuristics must find an
 * engine whose plan finalizes for it, forward and backward, for the
 * shapes `run` sends it (causal, GQA, a sliding window, dropout, the
 * 1.2B GPT's B4 T2048 H16 D128). Without a GPU driver (libcuda) cuDNN's
 * runtime-compiled engines cannot finalize a plan, so there the check is
 * cuDNN's own account of its heuristics (its debug log, level 2): each
 * graph must draw engine configurations from heuristics mode A, and every
 * one must fail for the missing driver alone
 * (NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING), none for its pattern
 * (NOT_SUPPORTED_GRAPH_PATTERN and the like: what a graph the fused
 * attention engines do not take gets). Running the plans needs a GPU:
 * real_run_cudnn_gpu. Skipped (77) where libcudnn cannot be opened.
 *   usage: test_cudnn_attn DEVICE.json */
#include "real/cudnn_attn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file from byte `from` (NULL when unreadable); the caller frees. */
static char *slurp(const char *path, long from)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f) - from;
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf) {
        fseek(f, from, SEEK_SET);
        n = (long)fread(buf, 1, (size_t)n, f);
        buf[n] = 0;
    }
    fclose(f);
    return buf;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n = 0;
    if (f && !fseek(f, 0, SEEK_END))
        n = ftell(f);
    if (f)
        fclose(f);
    return n;
}

/* cuDNN's log of one plan attempt: its first heuristics block (mode A).
 * 1 when it lists engine configurations that failed for the missing
 * driver only, and names them in `engines`; 0 with the first other reason. */
static int driver_only(const char *log, char *engines, int n, char *why, int wn)
{
    const char *b = log ? strstr(log, "No viable engine configs among (") : NULL;
    engines[0] = why[0] = 0;
    if (!b)
        return snprintf(why, (size_t)wn, "no heuristics result in cuDNN's log"), 0;
    const char *end = strstr(b, "w! Time");
    int configs = atoi(b + strlen("No viable engine configs among ("));
    for (const char *e = b; (e = strstr(e, "\"engineId\":")) && (!end || e < end); e++)
        snprintf(engines + strlen(engines), (size_t)(n - (int)strlen(engines)), "%s%d", engines[0] ? " " : "",
                 atoi(e + strlen("\"engineId\":")));
    for (const char *w = b; (w = strstr(w, "Warning: CUDNN_STATUS_")) && (!end || w < end); w++)
        if (strncmp(w + 9, "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
                    strlen("CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING"))) {
            const char *nl = strchr(w, '\n');
            snprintf(why, (size_t)wn, "%.*s", nl ? (int)(nl - w) : 200, w);
            return 0;
        }
    if (configs < 1)
        return snprintf(why, (size_t)wn, "no engine configuration suggested"), 0;
    return 1;
}

int main(int argc, char **argv)
{
    char err[1024], desc[128], engines[256], why[512], log[64];
    char *json = argc > 1 ? slurp(argv[1], 0) : NULL;
    snprintf(log, sizeof log, "/tmp/test_cudnn_attn.%d.log", (int)getpid());
    setenv("CUDNN_LOGLEVEL_DBG", "2", 1); /* warnings: the heuristics' reasons */
    setenv("CUDNN_LOGDEST_DBG", log, 1);
    if (!json) {
        fprintf(stderr, "usage: test_cudnn_attn DEVICE.json (a readable device description)\n");
        return 2;
    }
    cudnn_attn_t *c = cudnn_attn_open(json, err, sizeof err);
    free(json);
    if (!c) {
        printf("SKIP: %s\n", err);
        return strstr(err, "cannot open cuDNN") ? 77 : 1;
    }
    printf("cuDNN %ld, planning for %s\n", cudnn_attn_version(c), argv[1]);
    struct {
        const char *what;
        kern_attn_shape s;
    } cases[] = {
        {"causal, B2 T256 H8 D64", {2, 256, 8, 8, 64, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}},
        {"GQA 8 over 2, D128", {2, 512, 8, 2, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}},
        {"sliding window 128", {1, 1024, 4, 4, 64, 128, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}},
        {"dropout 0.1", {2, 256, 8, 8, 64, 0, {0.1f, 1.0f / 0.9f, 429496730u, 1, 3, 42, 0, 0, 8, 0}, KERN_ATTN_WHOLE}},
        {"1.2B GPT: B4 T2048 H16 D128, dropout 0.1",
         {4, 2048, 16, 16, 128, 0, {0.1f, 1.0f / 0.9f, 429496730u, 0, 1, 1234, 0, 0, 16, 0}, KERN_ATTN_WHOLE}},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int bwd = 0; bwd < 2; bwd++) {
            long from = file_size(log);
            long long ws = cudnn_attn_plan(c, bwd, &cases[i].s, desc, sizeof desc, err, sizeof err);
            char *text = ws < 0 ? slurp(log, from) : NULL;
            int ok = ws >= 0 || driver_only(text, engines, sizeof engines, why, sizeof why);
            free(text);
            printf("%-42s %-8s ", cases[i].what, bwd ? "backward" : "forward");
            if (ws >= 0)
                printf("planned: %s\n", desc);
            else if (ok)
                printf("taken by engines %s (no plan without a GPU driver)\n", engines);
            else
                printf("NOT TAKEN: %s; cuDNN: %s\n", err, why);
            bad += !ok;
        }
    /* a context-parallel block stays on megasim's kernels */
    kern_attn_shape blk = {1, 256, 4, 4, 64, 0, KERN_NO_DROPOUT, 512, 256, 0, 512};
    if (cudnn_attn_plan(c, 0, &blk, NULL, 0, err, sizeof err) >= 0 || !strstr(err, "context parallelism")) {
        printf("a CP block: expected a refusal naming context parallelism, got: %s\n", err);
        bad++;
    } else {
        printf("a CP block: refused (%s)\n", err);
    }
    cudnn_attn_close(c);
    remove(log);
    printf("%s: %d of 11 checks failed (expected: each graph taken by cuDNN's fused attention engines)\n",
           bad ? "FAIL" : "ok", bad);
    return bad != 0;
}

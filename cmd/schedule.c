/* cmd_schedule: `megasim schedule`: one rank's op program as text, one op a
 * line ("rank stream op key=value ..."), for reading, golden tests, diffs
 * and replay; --verify checks every stage's program against the others. */
#include "cmd/cli.h"
#include "model/layer.h"
#include "model/layout.h"
#include "model/moe.h"
#include "model/sched.h"
#include "model/split.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
    int rank, layers, verify, help;
    char replay[1024];
} schedule_opts_t;

static const opt_def schedule_defs[] = {
    {"rank", OPT_INT, offsetof(schedule_opts_t, rank), 0, 4194303, "0", 0, "schedule",
     "global rank whose program to print (in the job's rank order: TP fastest, then CP, DP, PP; PP before DP "
     "under --use-tp-pp-dp-mapping)"},
    {"layers", OPT_BOOL, offsetof(schedule_opts_t, layers), 0, 1, "false", 0, "schedule",
     "expand each forward/backward into its layer ops"},
    {"verify", OPT_BOOL, offsetof(schedule_opts_t, verify), 0, 1, "false", 0, "schedule",
     "check that every send has its receive and every wait is reachable, then print a summary"},
    {"replay", OPT_STR, offsetof(schedule_opts_t, replay), 1, 1024, "", 0, "schedule",
     "start from the job recorded in RESULT (.h5 from simulate or run --out, or a --json output or --trace "
     "file): the program of the run it records; files and flags apply over it"},
    {"help", OPT_BOOL, offsetof(schedule_opts_t, help), 0, 1, "false", 0, "schedule", "show this help"},
};
const opt_table schedule_opts = {schedule_defs, sizeof schedule_defs / sizeof schedule_defs[0], "schedule option"};

/* Each layer's ops of a FWD or BWD op (a dense or an MoE layer's), a
 * collective named by its group. */
static void print_layer_ops(const job_t *job, int rank, int stage, const sched_op_t *o)
{
    op_t ops[LAYER_MAX_OPS];
    int layers = split_chunk_layers(job, stage, o->chunk), first = split_layer_offset(job, stage, o->chunk);
    pass_t passes[2] = {o->kind == SOP_FWD ? PASS_FWD : PASS_RECOMPUTE, PASS_BWD};
    for (int l = 0; l < layers; l++) {
        int at = o->kind == SOP_FWD ? l : layers - 1 - l, moe = moe_layers_in(job, first + at, 1);
        for (int p = 0; p < (o->kind == SOP_FWD ? 1 : 2); p++) {
            int n = layer_ops_of(job, passes[p], moe, ops);
            for (int i = 0; i < n; i++)
                printf("%d   %s %s layer=%d m=%g n=%g k=%g batch=%g bytes=%.0f\n", rank,
                       ops[i].kind == OP_COLL ? op_group_name(ops[i].group) : "compute", ops[i].name, at, ops[i].m,
                       ops[i].n, ops[i].k, ops[i].batch, ops[i].bytes);
        }
    }
}

int cmd_schedule(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    schedule_opts_t so;
    job_t job;
    hw_t hw;
    int rc = cli_job_setup("schedule", argc - 1, argv + 1, &schedule_opts, &so, &job, &hw);
    if (rc)
        return rc;
    char err[OPT_ERR_LEN], line[512];
    if (so.rank >= job.num_gpus) {
        snprintf(err, sizeof err, "--rank = %d is not a rank of this job; allowed 0 to %d", so.rank, job.num_gpus - 1);
        return cli_fail("schedule", err);
    }
    if (so.verify) {
        if (sched_verify(&job, err, sizeof err))
            return cli_fail("schedule", err);
        printf("verified: %d stages x %d chunks x %d micro-batches; every send has its receive, every wait is reached\n",
               job.pp, job.vpp, job.num_microbatches);
        return 0;
    }
    layout_pos_t at = layout_pos(layout_of(&job), so.rank);
    int stage = at.stage;
    printf("# megasim schedule: rank %d = tp %d, dp %d, pp stage %d; %d chunks, %d micro-batches, warm-up %ld, %s p2p\n",
           so.rank, at.tp_i, at.dp_i, stage, job.vpp, job.num_microbatches, sched_warmup(&job, stage),
           job.pp_comm_overlap ? "decoupled" : "blocking");
    sched_iter_t it;
    sched_op_t o;
    sched_iter_init(&it, &job, stage);
    while (sched_next(&it, &o)) {
        sched_format(&o, line, sizeof line);
        printf("%d %s\n", so.rank, line);
        if (so.layers && (o.kind == SOP_FWD || o.kind == SOP_BWD))
            print_layer_ops(&job, so.rank, stage, &o);
    }
    return 0;
}

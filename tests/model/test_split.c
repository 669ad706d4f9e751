/* test_split: the layers of each pipeline stage and model chunk under the
 * even and uneven splits (model/split.h), against Megatron-Core's own
 * offsets worked out by hand from its formulas (transformer_layer.py,
 * get_transformer_layer_offset; transformer_block.py, get_num_layers_to_
 * build), every layer placed exactly once in model order, and the rules
 * that refuse a split that does not add up. */
#include "model/job.h"
#include "model/split.h"
#include "model/workload.h"
#include "../check.h"
#include "job_of.h"

#include <stdio.h>
#include <string.h>

/* Walking the chunks in model order (chunk 0 of every stage, then chunk
 * 1, ...), each chunk's first layer is the count of layers before it, and
 * the count ends at num-layers: every layer on exactly one chunk. */
static void every_layer_once(const char *what, const job_t *j)
{
    long next = 0, bad = 0;
    for (int c = 0; c < j->vpp; c++)
        for (int s = 0; s < j->pp; s++) {
            bad += split_layer_offset(j, s, c) != next || split_chunk_layers(j, s, c) < 0;
            next += split_chunk_layers(j, s, c);
        }
    char src[160];
    snprintf(src, sizeof src, "%s: chunks in model order, %ld offset(s) off", what, bad);
    check_eq("layers placed, each once", j->num_layers, bad ? -1 : next, src);
}

#define BASE "--preset none --hidden-size 1024 --num-attention-heads 16 --tensor-model-parallel-size 1 "

int main(void)
{
    job_t j;
    char err[OPT_ERR_LEN] = "";
    /* Llama 3 405B (arXiv 2407.21783, section 3.3.2): 126 layers, PP 16,
     * one layer per virtual stage, the first chunk the embedding alone and
     * the last the loss alone. Megatron: 128 slots, 8 per stage, 8 chunks;
     * offset = chunk x 16 + stage x 1, less 1 past the very first chunk. */
    CHECK(!job_of(BASE "--num-layers 126 --pipeline-model-parallel-size 16 --num-gpus 128 --global-batch-size 128 "
                       "--num-layers-per-virtual-pipeline-stage 1 --account-for-embedding-in-pipeline-split "
                       "--account-for-loss-in-pipeline-split", &j, err), "%s", err);
    const char *l3 = "Llama 3 405B's split: 128 slots / PP 16 / 1 per chunk";
    check_eq("Llama 3: chunks per stage", 8, j.vpp, l3);
    check_eq("Llama 3: stage 0 chunk 0 (embedding only)", 0, split_chunk_layers(&j, 0, 0), l3);
    check_eq("Llama 3: stage 15 chunk 7 (loss only)", 0, split_chunk_layers(&j, 15, 7), l3);
    check_eq("Llama 3: stage 0's layers", 7, split_stage_layers(&j, 0), "8 slots less the embedding");
    check_eq("Llama 3: stage 7's layers", 8, split_stage_layers(&j, 7), "8 slots");
    check_eq("Llama 3: stage 1 chunk 0 holds layer", 0, split_layer_offset(&j, 1, 0), "0 x 16 + 1 - 1");
    check_eq("Llama 3: stage 0 chunk 1 holds layer", 15, split_layer_offset(&j, 0, 1), "1 x 16 + 0 - 1");
    check_eq("Llama 3: stage 15 chunk 6 holds layer", 110, split_layer_offset(&j, 15, 6), "6 x 16 + 15 - 1");
    every_layer_once("Llama 3", &j);
    /* The end stages' own counts: 10 layers, PP 4, first 1, last 3: the
     * middle two share 6. Megatron: offset = (stage - 1) x 3 + 1. */
    CHECK(!job_of(BASE "--num-layers 10 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 0 --decoder-first-pipeline-num-layers 1 "
                       "--decoder-last-pipeline-num-layers 3", &j, err), "%s", err);
    const char *fl = "first 1, last 3, (10 - 4) / 2 each between";
    check_eq("first/last: stage 0's layers", 1, split_stage_layers(&j, 0), fl);
    check_eq("first/last: stage 2's layers", 3, split_stage_layers(&j, 2), fl);
    check_eq("first/last: stage 3's layers", 3, split_stage_layers(&j, 3), fl);
    check_eq("first/last: stage 2 starts at layer", 4, split_layer_offset(&j, 2, 0), "(2 - 1) x 3 + 1");
    every_layer_once("first 1, last 3", &j);
    /* With chunks: 16 layers, PP 4, first 2, last 2, 2 chunks per stage.
     * Megatron: 8 layers per round (1 + 6 + 1); offset = chunk x 8, plus
     * 1 + (stage - 1) x 3 past stage 0. */
    CHECK(!job_of(BASE "--num-layers 16 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 0 --num-virtual-stages-per-pipeline-rank 2 "
                       "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2", &j, err), "%s", err);
    const char *flv = "first 2, last 2, 2 chunks: 1 + 3 + 3 + 1 a round";
    check_eq("first/last, 2 chunks: stage 1 chunk 1's layers", 3, split_chunk_layers(&j, 1, 1), flv);
    check_eq("first/last, 2 chunks: stage 3 chunk 1 starts at", 15, split_layer_offset(&j, 3, 1),
             "1 x 8 + 1 + 2 x 3");
    check_eq("first/last, 2 chunks: stage 0 chunk 1 starts at", 8, split_layer_offset(&j, 0, 1), "1 x 8");
    every_layer_once("first 2, last 2, 2 chunks", &j);
    /* Even: unchanged (layers / (PP x chunks) each, chunk-major order). */
    CHECK(!job_of(BASE "--num-layers 24 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 2", &j, err), "%s", err);
    check_eq("even: stage 3 chunk 2 starts at", 22, split_layer_offset(&j, 3, 2), "(2 x 4 + 3) x 2");
    every_layer_once("even, 3 chunks", &j);
    /* Block recomputation of 2 layers per chunk over chunks of 1 and 2
     * layers (the loss counted): 47 of 46 + ... the share is the sum of
     * min(2, chunk) over the chunks / the layers. 46 layers + 2 slots on
     * PP 4, 2 per chunk: stage 0 chunk 0 and stage 3 chunk 5 hold 1. */
    CHECK(!job_of(BASE "--num-layers 46 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 2 --account-for-embedding-in-pipeline-split "
                       "--account-for-loss-in-pipeline-split --recompute-granularity full --recompute-method block "
                       "--recompute-num-layers 1", &j, err), "%s", err);
    check_near("block recompute: share of the layers rerun", 24.0 / 46, j.recompute_fraction, 0, 1e-15,
               "24 chunks rerun 1 layer each, of 46 layers");
    /* A stage's parameters follow its layers: stage 0 of the first/last
     * split holds 1 layer's, stage 1 three. */
    CHECK(!job_of(BASE "--num-layers 10 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 0 --decoder-first-pipeline-num-layers 1 "
                       "--decoder-last-pipeline-num-layers 3", &j, err), "%s", err);
    workload_t w;
    workload_compute(&j, &w);
    check_near("stage 1's parameters", 3 * w.params_layer, workload_stage_params_local(&j, 1), 0, 1e-12,
               "3 layers, TP 1, no embedding");
    /* The rules: each refused with one message naming it. */
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"--num-layers 10 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 "
         "--decoder-last-pipeline-num-layers 2", "leaves 7 layer(s) for 2 middle stage(s)"},
        {"--num-layers 10 --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 4 "
         "--decoder-last-pipeline-num-layers 4", "none (every layer on the two stages)"},
        {"--num-layers 10 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 4 "
         "--account-for-loss-in-pipeline-split", "cannot be combined"},
        {"--num-layers 12 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 3 "
         "--num-layers-per-virtual-pipeline-stage 1", "give the chunks per stage as num-virtual-stages"},
        {"--num-layers 12 --pipeline-model-parallel-size 1 --decoder-first-pipeline-num-layers 3",
         "needs pipeline-model-parallel-size > 1"},
        {"--num-layers 12 --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split",
         "make 13, not divisible by pipeline-model-parallel-size = 4"},
        {"--num-layers 12 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 3 "
         "--num-virtual-stages-per-pipeline-rank 2", "do not split into num-virtual-stages-per-pipeline-rank = 2"},
        {"--num-layers 12 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 1 "
         "--num-virtual-stages-per-pipeline-rank 3", "give one of the two"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[640];
        snprintf(args, sizeof args, BASE "--num-gpus 4 --global-batch-size 8 %s%s", bad[i].args,
                 strstr(bad[i].args, "per-virtual") ? "" : " --num-layers-per-virtual-pipeline-stage 0");
        int refused = job_of(args, &j, err) != 0;
        check_true(bad[i].needle, refused && strstr(err, bad[i].needle), refused ? err : "accepted");
    }
    return check_done("test_split");
}

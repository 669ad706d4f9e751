/* report: text and JSON renderings of an estimate (see report.h). */
#include "model/report.h"

#include "model/cost.h"
#include "model/layer.h"
#include "model/moe.h"

#include <cjson/cJSON.h>

#ifndef MEGASIM_VERSION
#define MEGASIM_VERSION "unknown"
#endif

#define GB 1e9

static const char *preset_name(int p)
{
    return p == PRESET_MEGATRON ? "megatron-lm" : p == PRESET_MEGASCALE ? "megascale" : "none";
}

static void line_s(FILE *f, const char *what, double s, double total)
{
    fprintf(f, "  %-28s %10.4f s  %5.1f%%\n", what, s, 100 * s / total);
}

static void line_b(FILE *f, const char *what, double b)
{
    fprintf(f, "  %-28s %10.2f GB\n", what, b / GB);
}
const char *report_mfu_peak(const job_t *j)
{
    return j->mfu_peak == MFU_PEAK_FP8 ? "fp8" : j->bf16 ? "bf16" : "tf32";
}


void report_text(FILE *f, const job_t *j, const hw_t *hw, const estimate_t *e)
{
    const breakdown_t *b = &e->br;
    const memory_t *m = &e->mem;
    char attn[16];
    opts_format(opts_find(&job_opts, "attention"), j, attn, sizeof attn);
    fprintf(f, "megasim predict (closed form), version %s\n\n", MEGASIM_VERSION);
    fprintf(f, "job: %.1fB parameters (l=%d h=%d heads=%d groups=%d ffn=%d s=%d V=%d), batch %d x %d tokens\n",
            e->work.params_total / 1e9, j->num_layers, j->hidden_size, j->num_attention_heads,
            j->num_query_groups, j->ffn_hidden_size, j->seq_length, j->padded_vocab_size,
            j->global_batch_size, j->seq_length);
    if (j->num_experts > 0)
        fprintf(f, "experts: %d of FFN %d, top-%d, every %d layer(s); %.1fB parameters active per token (MFU counts "
                   "them); EP %d x ETP %d x EDP %d, %s dispatcher\n", j->num_experts, j->moe_ffn_hidden_size,
                j->moe_topk, j->moe_layer_freq, e->work.params_active / 1e9, j->ep, j->etp, j->edp,
                j->moe_dispatcher == MOE_ALLTOALL ? "alltoall" : "allgather");
    char cp[64] = "";
    if (j->cp > 1)
        snprintf(cp, sizeof cp, " x CP %d (%s)", j->cp, (const char *[]){"p2p", "all_gather", "a2a"}[j->cp_comm_type]);
    fprintf(f, "plan: %d GPUs = TP %d%s x PP %d x DP %d, %d chunk(s) per stage, micro-batch %d, %d micro-batches\n",
            j->num_gpus, j->tp, cp, j->pp, j->dp, j->vpp, j->micro_batch_size, j->num_microbatches);
    char rc[64];
    if (j->recompute == RECOMPUTE_FULL)
        snprintf(rc, sizeof rc, "full (%s, %d layer%s)", j->recompute_method == RECOMPUTE_BLOCK ? "block" : "uniform",
                 j->recompute_num_layers, j->recompute_num_layers > 1 ? "s" : "");
    else
        snprintf(rc, sizeof rc, "%s", j->recompute == RECOMPUTE_SELECTIVE ? "selective" : "none");
    fprintf(f, "techniques: preset %s; SP %s, ZeRO %d, recompute %s, attention %s, parallel block %s,\n"
               "  window %d, optimizer %s, overlap TP %s / PP %s / DP grad %s param %s, fused %s, async data %s\n",
            preset_name(j->preset), j->sequence_parallel ? "on" : "off", j->zero_stage, rc,
            attn, j->parallel_block ? "on" : "off", j->window,
            j->optimizer == OPTIM_LAMB ? "lamb" : "adam", j->tp_comm_overlap ? "on" : "off",
            j->pp_comm_overlap ? "on" : "off", j->overlap_grad_reduce ? "on" : "off",
            j->overlap_param_gather ? "on" : "off", j->fused_elementwise ? "on" : "off",
            j->async_data_loader ? "on" : "off");
    fprintf(f, "hardware: %s (%.4g TFLOP/s peak), cluster %s (%d GPUs/node, %d x %.0f Gb/s NICs)\n\n",
            hw->gpu.name, e->peak_flops / 1e12, hw->cluster.name, hw->cluster.gpus_per_node,
            hw->cluster.nics_per_node, hw->cluster.nic_gbit);
    fprintf(f, "iteration time %.3f s   tokens/s %.4g   days for 300B tokens %.1f\n",
            e->iteration_s, e->tokens_per_s, e->days_for_300b_tokens);
    fprintf(f, "MFU %.1f%%  = model FLOPs %.4g / (%.3f s x %d GPUs x %.4g TFLOP/s, the %s peak)\n", 100 * e->mfu,
            e->work.model_flops_per_iter, e->iteration_s, j->num_gpus, e->peak_flops / 1e12, report_mfu_peak(j));
    fprintf(f, "HFU %.1f%%  = hardware FLOPs %.4g (with recomputation) / same\n", 100 * e->hfu,
            e->work.hw_flops_per_iter);
    fprintf(f, "model FLOPs per token %.4g (Megatron: 72 l h^2 (1 + s/6h + V/12lh) / s per token, "
               "window factor %.3f)\n\n", e->work.model_flops_per_token, e->work.attn_window_factor);
    fprintf(f, "time per iteration (critical path, slowest stage %d):\n", e->st.slowest_stage);
    line_s(f, "compute", b->compute_s, e->iteration_s);
    line_s(f, "pipeline bubble", b->bubble_s, e->iteration_s);
    line_s(f, "exposed TP/SP communication", b->exposed_tp_comm_s, e->iteration_s);
    line_s(f, "exposed PP communication", b->exposed_pp_comm_s, e->iteration_s);
    line_s(f, "exposed DP communication", b->exposed_dp_comm_s, e->iteration_s);
    line_s(f, "optimizer step", b->optimizer_s, e->iteration_s);
    line_s(f, "other (host, emb. sync, overhead)", b->other_s, e->iteration_s);
    fprintf(f, "  per micro-batch on the slowest stage: forward %.2f ms, backward %.2f ms, "
               "one p2p transfer %.3f ms\n\n", e->st.fwd_s * 1e3, e->st.bwd_s * 1e3, e->st.p2p_s * 1e3);
    fprintf(f, "memory per GPU at its peak (stage %d, %.1f micro-batches in flight):\n", m->peak_stage,
            m->inflight_microbatches);
    line_b(f, "weights", m->weights_bytes);
    line_b(f, "gradients", m->grads_bytes);
    line_b(f, "optimizer states", m->optimizer_bytes);
    line_b(f, "activations", m->activations_bytes);
    line_b(f, "layer working set", m->workspace_bytes);
    line_b(f, "communication buffers", m->comm_buffers_bytes);
    line_b(f, "runtime reserve", m->runtime_bytes);
    fprintf(f, "  %-28s %10.2f GB of %.2f GB: %s\n", "total", m->total_bytes / GB, m->capacity_bytes / GB,
            m->fits ? "fits" : "DOES NOT FIT");
    if (m->host_offload_bytes > 0)
        fprintf(f, "  %-28s %10.2f GB of host memory (pinned; not in the total)\n", "offloaded activations",
                m->host_offload_bytes / GB);
}

cJSON *report_config_json(const job_t *j, const hw_t *hw)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "version", MEGASIM_VERSION);
    cJSON_AddItemToObject(c, "job", opts_to_json(&job_opts, j));
    cJSON_AddItemToObject(c, "hardware", hw_to_json(hw));
    return c;
}

cJSON *report_memory_json(const estimate_t *e)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "weights_bytes", e->mem.weights_bytes);
    cJSON_AddNumberToObject(m, "gradients_bytes", e->mem.grads_bytes);
    cJSON_AddNumberToObject(m, "optimizer_bytes", e->mem.optimizer_bytes);
    cJSON_AddNumberToObject(m, "activations_bytes", e->mem.activations_bytes);
    cJSON_AddNumberToObject(m, "host_offload_bytes", e->mem.host_offload_bytes);
    cJSON_AddNumberToObject(m, "workspace_bytes", e->mem.workspace_bytes);
    cJSON_AddNumberToObject(m, "comm_buffers_bytes", e->mem.comm_buffers_bytes);
    cJSON_AddNumberToObject(m, "runtime_bytes", e->mem.runtime_bytes);
    cJSON_AddNumberToObject(m, "capacity_bytes", e->mem.capacity_bytes);
    cJSON_AddNumberToObject(m, "peak_stage", e->mem.peak_stage);
    return m;
}

cJSON *report_json(const job_t *j, const hw_t *hw, const estimate_t *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "iteration_time_s", e->iteration_s);
    cJSON_AddNumberToObject(o, "tokens_per_s", e->tokens_per_s);
    cJSON_AddNumberToObject(o, "mfu", e->mfu);
    cJSON_AddNumberToObject(o, "hfu", e->hfu);
    cJSON_AddStringToObject(o, "mfu_peak", report_mfu_peak(j));
    cJSON_AddNumberToObject(o, "model_flops_per_iteration", e->work.model_flops_per_iter);
    cJSON_AddNumberToObject(o, "hardware_flops_per_iteration", e->work.hw_flops_per_iter);
    cJSON_AddNumberToObject(o, "params_total", e->work.params_total);
    cJSON_AddNumberToObject(o, "params_active", e->work.params_active);
    cJSON_AddNumberToObject(o, "peak_memory_per_gpu_bytes", e->mem.total_bytes);
    cJSON_AddBoolToObject(o, "fits_in_memory", e->mem.fits);
    cJSON_AddNumberToObject(o, "days_for_300b_tokens", e->days_for_300b_tokens);
    cJSON *b = cJSON_AddObjectToObject(o, "breakdown");
    cJSON_AddNumberToObject(b, "compute_s", e->br.compute_s);
    cJSON_AddNumberToObject(b, "bubble_s", e->br.bubble_s);
    cJSON_AddNumberToObject(b, "exposed_tp_comm_s", e->br.exposed_tp_comm_s);
    cJSON_AddNumberToObject(b, "exposed_pp_comm_s", e->br.exposed_pp_comm_s);
    cJSON_AddNumberToObject(b, "exposed_dp_comm_s", e->br.exposed_dp_comm_s);
    cJSON_AddNumberToObject(b, "optimizer_s", e->br.optimizer_s);
    cJSON_AddNumberToObject(b, "other_s", e->br.other_s);
    cJSON_AddItemToObject(o, "memory", report_memory_json(e));
    cJSON_AddItemToObject(o, "config", report_config_json(j, hw));
    return o;
}

/* One pass's ops of a dense (moe 0) or an MoE layer, with their modelled
 * times; a repeated op's amount and rate count all its runs. */
static void report_pass_ops(FILE *f, const job_t *j, const hw_t *hw, pass_t pass, int moe)
{
    static const char *kinds[] = {"gemm", "attn", "elem", "coll", "p2p", "optim"};
    static const char *ovl[] = {"exposed", "async", "chunked"};
    static const char *passes[] = {"forward", "backward", "recompute"};
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops_of(j, pass, moe, ops);
    if (!n)
        return;
    fprintf(f, "\none %slayer, %s, per micro-batch per GPU:\n", j->num_experts <= 0 ? "" : moe ? "MoE " : "dense ",
            passes[pass]);
    fprintf(f, "  %-16s %-5s %-40s %12s %10s  %12s  %s\n", "op", "kind", "shape", "GFLOP|MB", "time_us",
            "TFLOP/s|GB/s", "waves");
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const op_t *o = &ops[i];
        double t = cost_op_s(hw, j, o), fl = op_flops(o) * op_runs(o);
        char shape[64] = "", waves[16] = "";
        const hw_gpu_t *g = &hw->gpu;
        int k = 0;
        if (o->kind == OP_GEMM) {
            k = snprintf(shape, sizeof shape, "%gx%gx%g x%g", o->m, o->n, o->k, o->batch);
            snprintf(waves, sizeof waves, "%.3f",
                     cost_gemm_fill(g, o->m, o->n, o->k, o->batch));
        } else if (o->kind == OP_ATTN) {
            k = snprintf(shape, sizeof shape, "bh=%g s=%g w=%g d=%g", o->batch, o->attn_seq, o->attn_window, o->attn_d);
            int block = o->attn_bwd ? g->attn_block_k : g->attn_block_q;
            if (block) /* else the profile's curves include the grid's fill */
                snprintf(waves, sizeof waves, "%.3f",
                         cost_attn_wave_eff(block, cost_attn_slots(g, o->attn_bwd),
                                            cost_attn_grid_heads(o->batch, o->attn_group, o->attn_bwd, o->attn_v1),
                                            o->attn_seq, o->attn_window, o->attn_bwd));
            else
                snprintf(waves, sizeof waves, "in curve");
        } else if (o->kind == OP_COLL)
            k = snprintf(shape, sizeof shape, "%s %s, %s", op_coll_name(o->coll), op_group_name(o->group),
                         ovl[o->overlap]);
        if (op_runs(o) > 1 && k >= 0 && k < (int)sizeof shape)
            snprintf(shape + k, sizeof shape - k, " (%d runs)", op_runs(o));
        double amount = fl ? fl / 1e9 : o->bytes * op_runs(o) / 1e6;
        double rate = t <= 0 ? 0 : fl ? fl / t / 1e12 : o->bytes * op_runs(o) / t / 1e9;
        fprintf(f, "  %-16s %-5s %-40s %12.3f %10.1f  %12.1f  %s\n", o->name, kinds[o->kind], shape, amount, t * 1e6,
                rate, waves);
        sum += t;
    }
    fprintf(f, "  %-16s %-5s %-40s %12s %10.1f  (serial sum, before overlap)\n", "total", "", "", "", sum * 1e6);
}

void report_ops(FILE *f, const job_t *j, const hw_t *hw)
{
    int moe_layers = moe_layers_in(j, 0, j->num_layers);
    for (int moe = 0; moe <= 1; moe++) {
        if (moe ? moe_layers == 0 : moe_layers == j->num_layers)
            continue; /* no layer of this kind */
        for (int p = PASS_FWD; p <= PASS_RECOMPUTE; p++)
            report_pass_ops(f, j, hw, (pass_t)p, moe);
    }
}

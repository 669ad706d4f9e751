/* moe: the mixture-of-experts layer's shape, parameters and rules (see
 * moe.h). */
#include "model/moe.h"

#include "model/split.h"
#include "model/workload.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define RULE JOB_RULE

/* One MLP's parameters: FC1 (gate and up under SwiGLU) and FC2, with
 * their biases when the model has linear biases. */
double moe_mlp_of(const job_t *j, double f, int biases)
{
    double h = j->hidden_size, fc1 = (j->swiglu ? 2.0 : 1.0) * f;
    return h * fc1 + f * h + (biases && !j->disable_bias_linear ? fc1 + h : 0);
}

static double moe_expert_params(const job_t *j) { return moe_mlp_of(j, j->moe_ffn_hidden_size, 1); }

double moe_expert_params_local(const job_t *j)
{
    return (double)j->num_experts / j->ep * moe_expert_params(j) / j->etp;
}

double moe_mlp_params(const job_t *j, int active, int biases)
{
    double router = (double)j->hidden_size * j->num_experts;
    double shared = j->moe_shared_ffn ? moe_mlp_of(j, j->moe_shared_ffn, biases) +
                                            (j->moe_shared_gate ? (double)j->hidden_size : 0) : 0;
    return (active ? j->moe_topk : j->num_experts) * moe_mlp_of(j, j->moe_ffn_hidden_size, biases) + router + shared;
}

int moe_chunk_layers(const job_t *j, int stage, int chunk)
{
    return moe_layers_in(j, split_layer_offset(j, stage, chunk), split_chunk_layers(j, stage, chunk));
}

int moe_stage_layers(const job_t *j, int stage)
{
    int n = 0;
    for (int c = 0; c < j->vpp && j->num_experts > 0; c++)
        n += moe_chunk_layers(j, stage, c);
    return n;
}

int moe_layers_in(const job_t *j, int first, int n)
{
    if (j->num_experts <= 0 || n <= 0)
        return 0;
    int f = j->moe_layer_freq, a = first > j->moe_dense_first ? first : j->moe_dense_first, b = first + n - 1;
    return b < a ? 0 : b / f - (a + f - 1) / f + 1; /* multiples of f in [a, b], past the dense first layers */
}

double moe_rows_local(const job_t *j)
{
    double tokens = job_tokens_local(j) / j->tp; /* SP's share (MoE under TP needs SP) */
    double rows = tokens * j->moe_topk * j->etp;
    if (j->moe_capacity_factor > 0 && j->moe_pad_to_capacity)
        rows *= j->moe_capacity_factor; /* every expert at its capacity */
    return rows;
}

/* E[max of n independent standard normals] = the integral of x n phi(x)
 * Phi(x)^(n-1) (Simpson's rule on [-10, 10], 4,000 steps: 1e-10), kept for
 * the last n asked (a search asks the same n plan after plan). */
static double expected_max_normal(int n)
{
    static int last_n;
    static double last;
    if (n == last_n)
        return last;
    const int steps = 4000;
    double a = -10, w = 20.0 / steps, sum = 0;
    for (int i = 0; i <= steps; i++) {
        double x = a + i * w, phi = exp(-0.5 * x * x) / sqrt(2 * M_PI), Phi = 0.5 * erfc(-x / sqrt(2));
        double f = x * n * phi * pow(Phi, n - 1);
        sum += (i == 0 || i == steps ? 1 : i % 2 ? 4 : 2) * f;
    }
    last_n = n, last = sum * w / 3;
    return last;
}

/* A load factor under the capacity: padded experts compute their capacity
 * whatever comes (moe_rows_local holds it: 1 here); dropping ones at most
 * their capacity, the rest of the tokens dropped. */
static double capped(const job_t *j, double f)
{
    if (j->moe_capacity_factor > 0 && j->moe_pad_to_capacity)
        return 1;
    return j->moe_capacity_factor > 0 && f > j->moe_capacity_factor ? j->moe_capacity_factor : f;
}

int moe_imbalanced(const job_t *j) { return j->num_experts > 0 && j->moe_load_cv > 0 && j->ep > 1; }

double moe_load_factor(const job_t *j)
{
    if (!moe_imbalanced(j))
        return 1;
    return capped(j, 1 + j->moe_load_cv / sqrt((double)j->num_experts / j->ep) * expected_max_normal(j->ep));
}

/* splitmix64: a counter-based draw, the same on every rank that asks. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The standard normal's x with P(Z < x) = p, 0 < p < 1: Acklam's rational
 * approximation (relative error 1.2e-9) and one Halley step on erfc. */
static double normal_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    double x, q = fmin(p, 1 - p);
    if (q < 0.02425) { /* a tail */
        double r = sqrt(-2 * log(q));
        x = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) /
            ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1);
        x = p < 0.5 ? x : -x;
    } else {
        double s = p - 0.5, r = s * s;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * s /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2)) - p, u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

double moe_load_draw(const job_t *j, uint64_t seed, int stage, int chunk, long mb, int layer)
{
    if (!moe_imbalanced(j))
        return 1;
    /* The largest of EP standard normals in one draw: its CDF is Phi^EP, so
     * Phi^-1(U^(1 / EP)) for a uniform U (whatever EP, one draw an op). */
    double cv = j->moe_load_cv / sqrt((double)j->num_experts / j->ep);
    uint64_t key = mix(seed ^ mix(((uint64_t)stage << 40) ^ ((uint64_t)chunk << 32) ^ (uint64_t)mb) ^
                       mix((uint64_t)layer + 1));
    double u = ((mix(key) >> 11) + 0.5) * 0x1p-53;
    double most = normal_quantile(exp(log(u) / j->ep));
    return capped(j, fmax(0, 1 + cv * most)); /* a rank's load is never negative */
}

double moe_chunk_load(const job_t *j, uint64_t seed, int stage, int chunk, long mb)
{
    int n = moe_imbalanced(j) ? moe_chunk_layers(j, stage, chunk) : 0;
    if (n <= 0)
        return 1;
    double sum = 0;
    for (int l = 0; l < n; l++)
        sum += moe_load_draw(j, seed, stage, chunk, mb, l);
    return sum / n;
}

int moe_finalize(job_t *j, char *err)
{
    j->edp = j->dp_cp;
    if (j->num_experts <= 0)
        return 0;
    if (j->moe_ffn_hidden_size == 0)
        j->moe_ffn_hidden_size = j->ffn_hidden_size;
    if (j->etp == 0)
        j->etp = j->tp;
    RULE(j->num_experts % j->ep == 0,
         "expert-model-parallel-size = %d does not divide num-experts = %d (each EP rank holds whole experts)",
         j->ep, j->num_experts);
    RULE(j->moe_topk <= j->num_experts, "moe-router-topk = %d is above num-experts = %d (allowed: 1 to %d)",
         j->moe_topk, j->num_experts, j->num_experts);
    long long attn = (long long)j->tp * j->cp * j->dp, expert = (long long)j->etp * j->ep;
    RULE(attn % expert == 0,
         "expert-tensor-parallel-size x expert-model-parallel-size = %d x %d = %lld does not divide TP x CP x DP = "
         "%lld: the expert groups fold into the attention's ranks, ETP x EP x EDP x PP = the world size", j->etp,
         j->ep, expert, attn);
    j->edp = (int)(attn / expert);
    RULE(j->tp == 1 || j->sequence_parallel,
         "num-experts with tensor-model-parallel-size = %d needs --sequence-parallel (Megatron-Core's rule for MoE "
         "under TP)", j->tp);
    RULE(j->moe_ffn_hidden_size % j->etp == 0,
         "moe-ffn-hidden-size = %d is not divisible by expert-tensor-parallel-size = %d", j->moe_ffn_hidden_size,
         j->etp);
    RULE(!j->moe_pad_to_capacity || j->moe_capacity_factor > 0,
         "moe-pad-expert-input-to-capacity needs moe-expert-capacity-factor (a capacity to pad to)");
    RULE(!j->parallel_block, "num-experts with --parallel-block: an MoE layer's MLP does not run beside its "
                             "attention (allowed: --no-parallel-block)");
    RULE(j->moe_shared_ffn % j->tp == 0,
         "moe-shared-expert-intermediate-size = %d is not divisible by tensor-model-parallel-size = %d",
         j->moe_shared_ffn, j->tp);
    return 0;
}

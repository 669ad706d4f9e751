/* tests/goodput/test_goodput.c CASE: the fault model (model/fault.h) and
 * the Monte Carlo of a whole run (sim/goodput.h). Each check prints the
 * expected value, the value got and where the expected one comes from. */
#include "model/fault.h"
#include "sim/goodput.h"
#include "tests/check.h"

#include <string.h>

#define HOUR 3600.0
#define DAY 86400.0

/* A run the analytic model describes exactly: one cause (restart in
 * place), no slow hosts, spares never short; rate r, recovery down_s. */
static void simple_model(gp_model_t *m, double mtbf_s, double down_s, double interval_s, double stall_s)
{
    memset(m, 0, sizeof *m);
    m->nodes = 1536, m->spare_nodes = -1, m->slow_ratio = 1, m->seed = 7;
    m->rate_per_s[FAULT_SOFTWARE] = 1 / mtbf_s;
    m->recover[FAULT_SOFTWARE] = RECOVER_RESTART;
    m->cost.relaunch_s = down_s;
    m->cost.stage1_s = stall_s;
    m->interval_s = interval_s;
    m->work_s = 60 * DAY;
    m->repair_s = 48 * HOUR;
}

static double mc_ettr(const gp_model_t *m, long n)
{
    gp_trial_t *t = malloc(sizeof *t * n);
    CHECK(t && gp_run_trials(m, 0, n, t) == 0, "trials");
    double s = 0;
    for (long i = 0; i < n; i++)
        s += t[i].useful_s / t[i].wall_s;
    free(t);
    return s / n;
}

static fault_renewal_t renewal_of(const gp_model_t *m, double down_s)
{
    return (fault_renewal_t){m->rate_per_s[FAULT_SOFTWARE], down_s, m->interval_s, m->cost.stage1_s, 1};
}

/* Where the analytic assumptions hold (Poisson failures while the job
 * runs, the same recovery every time, spares never short) the Monte Carlo
 * must agree with the renewal-reward expectation: the paper-scale case
 * (MTBF 4.1 h at 12,288 GPUs, 9 minutes of recovery, 5-minute interval). */
static void case_renewal(void)
{
    gp_model_t m;
    simple_model(&m, 4.12 * HOUR, 540, 300, 3.2);
    fault_renewal_t rn = renewal_of(&m, 540);
    double exact = fault_ettr_renewal(&rn), mc = mc_ettr(&m, 4000);
    check_near("Monte Carlo ETTR = renewal-reward (paper scale)", exact, mc, 0.003, 0,
               "fault_ettr_renewal: interval / ((1/rate + down)(exp(rate L) - 1)); issue 34: within 1%");
    check_near("first order agrees here too (L, down << MTBF)", exact, fault_ettr_first_order(&rn), 0.003, 0,
               "1 - rate (L/2 + down) - stall/interval");
}

/* A checkpoint as long as a third of the MTBF: the renewal model and the
 * Monte Carlo still agree (the model is exact for this process), but the
 * first-order form parts: it counts at most one failure per interval and
 * none during a checkpoint or a recovery, and its loss grows linearly
 * where the true loss grows exponentially in rate x (interval + stall). */
static void case_parts(void)
{
    gp_model_t m;
    simple_model(&m, 1 * HOUR, 600, 1800, 1200);
    fault_renewal_t rn = renewal_of(&m, 600);
    double exact = fault_ettr_renewal(&rn), mc = mc_ettr(&m, 4000), fo = fault_ettr_first_order(&rn);
    check_near("Monte Carlo = renewal-reward (stall = MTBF / 3)", exact, mc, 0.01, 0,
               "the renewal model is exact for this process");
    char why[256];
    snprintf(why, sizeof why, "first order %.4f vs exact %.4f, Monte Carlo %.4f: it assumes one failure per interval "
             "at most", fo, exact, mc);
    check_true("first order parts from both by more than 5 points", fabs(fo - exact) > 0.05, why);
}

/* Young/Daly's sqrt(2 c M) against the optimum of the exact expectation:
 * within 10% where the checkpoint cost c is much smaller than the MTBF M
 * (issue 34); far off where it is not. */
static void case_young_daly(void)
{
    gp_model_t m;
    simple_model(&m, 4.12 * HOUR, 540, 300, 3.2);
    fault_renewal_t rn = renewal_of(&m, 540);
    double yd = fault_young_daly_s(3.2, 1 / (4.12 * HOUR)), best = fault_best_interval_renewal(&rn);
    check_rel("Young/Daly = best interval, c = 3.2 s, M = 4.12 h", best, yd, 0.10,
              "golden section on fault_ettr_renewal; Young 1974, Daly 2006");
    simple_model(&m, 1 * HOUR, 600, 1800, 1200);
    rn = renewal_of(&m, 600);
    yd = fault_young_daly_s(1200, 1 / HOUR), best = fault_best_interval_renewal(&rn);
    char why[128];
    snprintf(why, sizeof why, "Young/Daly %.0f s, best %.0f s (c = M/3: its expansion no longer holds)", yd, best);
    check_true("Young/Daly parts from the best by over 10% when c ~ M", fabs(yd / best - 1) > 0.10, why);
}

/* Every second of every trial lands in useful training or one lost
 * category; a booking ends exactly at its length. */
static void case_accounting(void)
{
    hw_faults_t f;
    CHECK(fault_builtin("megascale", &f) == 0, "builtin");
    fault_job_t j = {12288, 8, 8, 8, 192, 25, 5.6e9, 2.45e12};
    gp_model_t m;
    memset(&m, 0, sizeof m);
    fault_costs(&f, &j, &m.cost);
    m.nodes = 1536, m.spare_nodes = 4, m.evict_stragglers = 1, m.slow_host_fraction = 0.005, m.slow_ratio = 1.05;
    m.interval_s = 600, m.wall_limit_s = 30 * DAY, m.repair_s = 48 * HOUR, m.seed = 3;
    for (int i = 0; i < FAULT_NRATES; i++)
        m.rate_per_s[i] = fault_rate_per_s(&f, i, 1536), m.recover[i] = f.recover[i];
    enum { N = 200 };
    static gp_trial_t t[N];
    CHECK(gp_run_trials(&m, 0, N, t) == 0, "trials");
    double worst = 0, worst_end = 0;
    for (int i = 0; i < N; i++) {
        double sum = t[i].useful_s;
        for (int k = 0; k < LOST_N; k++)
            sum += t[i].lost_s[k];
        worst = fmax(worst, fabs(sum - t[i].wall_s) / t[i].wall_s);
        worst_end = fmax(worst_end, fabs(t[i].wall_s - m.wall_limit_s));
    }
    check_near("useful + lost = wall (worst trial, relative)", 0, worst, 1e-9, 0, "every second is accounted");
    check_near("a 30-day booking ends at 30 days (worst, s)", 0, worst_end, 1e-6, 0, "--train-days");
    /* The same trials, split in two blocks: the same bytes. */
    static gp_trial_t a[N];
    CHECK(gp_run_trials(&m, 0, N / 2, a) == 0 && gp_run_trials(&m, N / 2, N / 2, a + N / 2) == 0, "blocks");
    check_true("trials split in blocks give the same bytes", !memcmp(a, t, sizeof t),
               "trial i draws from its own generator (seed, i)");
    /* Spares: none, 4, unlimited: ETTR rises, the wait for repairs falls to 0. */
    double e[3], wait_unlimited = 0;
    int pools[3] = {0, 4, -1};
    for (int p = 0; p < 3; p++) {
        m.spare_nodes = pools[p];
        CHECK(gp_run_trials(&m, 0, N, t) == 0, "trials");
        e[p] = 0;
        for (int i = 0; i < N; i++) {
            e[p] += t[i].useful_s / t[i].wall_s / N;
            if (pools[p] < 0)
                wait_unlimited += t[i].lost_s[LOST_SPARE_WAIT];
        }
    }
    char why[160];
    snprintf(why, sizeof why, "no spares %.4f < 4 spares %.4f < unlimited %.4f", e[0], e[1], e[2]);
    check_true("ETTR rises with the spare pool", e[0] < e[1] && e[1] < e[2], why);
    check_near("no repair wait with unlimited spares (s)", 0, wait_unlimited, 0, 0, "a spare is always free");
}

/* The built-in rates: Llama 3's 419 unexpected interruptions in 54 days on
 * 2,048 servers, and MegaScale's collective initialisation (section 4). */
static void case_builtin(void)
{
    hw_faults_t f;
    CHECK(fault_builtin("megascale", &f) == 0, "builtin");
    double sum = 0;
    for (int i = 0; i < FAULT_NRATES; i++)
        sum += f.rate[i];
    check_rel("failures per 1000 node-days, all causes", 419 / (2048 * 54 / 1000.0), sum, 1e-12,
              "Llama 3 Table 5: 419 in 54 days on 2,048 servers");
    fault_job_t j = {2048, 8, 8, 8, 32, 25, 5.6e9, 2.45e12};
    check_eq("group creations, TP 8 PP 8 DP 32 on 2,048 GPUs", 1184, fault_init_groups(&j),
             "2 TP*PP + N/TP + 3 N/PP + DP (Megatron-Core's initialize_model_parallel)");
    check_rel("TCPStore init, 2,048 GPUs (s)", 1047, fault_init_s(&f, &j, INIT_TCPSTORE), 0.20, "MegaScale section 4");
    check_rel("Redis init, 2,048 GPUs (s)", 361, fault_init_s(&f, &j, INIT_REDIS), 0.20, "MegaScale section 4");
    double nb = fault_init_s(&f, &j, INIT_NOBARRIER);
    check_true("no-barrier init, 2,048 GPUs, under 5 s", nb < 5, "MegaScale section 4: under 5 s");
    fault_job_t big = j;
    big.num_gpus = 12288, big.dp = 192;
    double nb12 = fault_init_s(&f, &big, INIT_NOBARRIER), tcp12 = fault_init_s(&f, &big, INIT_TCPSTORE);
    char why[128];
    snprintf(why, sizeof why, "%.3g s (MegaScale: under 30 s above 10,000 GPUs)", nb12);
    check_true("no-barrier init, 12,288 GPUs, under 30 s", nb12 < 30, why);
    check_rel("TCPStore grows as N x groups: 12,288 / 2,048 GPUs", 6.0 * 6464 / 1184,
              (tcp12 - 1.5) / (fault_init_s(&f, &j, INIT_TCPSTORE) - 1.5), 1e-9,
              "6x the ranks, 6,464 / 1,184 group creations (each a barrier of N turns), ~N^2");
    /* Load: one reader per DP group reads one copy; every rank reads its own. */
    double every = fault_load_s(&f, &big, LOAD_EVERY_RANK);
    check_rel("every-rank load (s)", 12288 * 5.6e9 / (2000e9), every, 1e-12,
              "12,288 x 5.6 GB at the storage's 2 TB/s (Llama 3's Tectonic)");
    double one = fault_load_s(&f, &big, LOAD_ONE_PER_DP_GROUP);
    check_rel("one reader per DP group (s)", 2.45e12 / (64 * 25e9) + 5.6e9 / 25e9, one, 1e-12,
              "2.45 TB over 64 readers' 25 GB/s NICs, then one shard's broadcast");
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "renewal"))
        case_renewal();
    else if (!strcmp(c, "parts"))
        case_parts();
    else if (!strcmp(c, "young_daly"))
        case_young_daly();
    else if (!strcmp(c, "accounting"))
        case_accounting();
    else if (!strcmp(c, "builtin"))
        case_builtin();
    else {
        fprintf(stderr, "usage: test_goodput renewal|parts|young_daly|accounting|builtin\n");
        return 2;
    }
    return check_done("goodput");
}

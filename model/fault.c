/* fault: the fault section's table and checks, the restart path priced by
 * mechanism, and the analytic ETTR (see fault.h; the defaults and their
 * sources are in fault_builtin.c). */
#include "model/fault.h"
#include "model/layout.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define F(f) offsetof(hw_faults_t, f)
#define DETECTS "error|heartbeat|straggler"
#define RECOVERS "restart|evict|repair"

const char *const fault_cause_names[FAULT_NCAUSES] = {"gpu", "hbm", "host", "nic", "switch", "software", "sdc",
                                                      "straggler"};

/* One component's three fields. A rate is 0 (never fails) or from one
 * failure per node in 2.7 million years to one per node a second. */
#define CAUSE(key, i, what)                                                                                        \
    {key "-per-1000-node-days", OPT_REAL, F(rate[i]), 1e-6, 8.64e7, 0, OPT_ZERO_OK, "faults",                    \
     what ": failures per 1000 node-days"},                                                                        \
    {key "-detect", OPT_ENUM, F(detect[i]), 0, 0, 0, DETECTS, "faults", what ": how the failure is seen"},          \
    {key "-recovery", OPT_ENUM, F(recover[i]), 0, 0, 0, RECOVERS, "faults",                                        \
     what ": restart in place, evict the node for a spare, or wait for a repair"}

/* No defaults: a section gives every field or names a "base" cluster. */
static const opt_def fault_defs[] = {
    CAUSE("gpu", FAULT_GPU, "GPU (faulty GPU, SRAM, system processor, thermal)"),
    CAUSE("hbm", FAULT_HBM, "GPU HBM memory"),
    CAUSE("host", FAULT_HOST, "host (maintenance, SSD, power, chassis, CPU, memory)"),
    CAUSE("nic", FAULT_NIC, "NIC"),
    CAUSE("switch", FAULT_SWITCH, "network switch or cable"),
    CAUSE("software", FAULT_SOFTWARE, "software bug, dependency or NCCL hang"),
    CAUSE("sdc", FAULT_SDC, "silent data corruption"),
    {"error-report-s", OPT_REAL, F(error_report_s), 0, 1e6, 0, 0, "faults",
     "an explicit error reaches the driver, s"},
    {"heartbeat-interval-s", OPT_REAL, F(heartbeat_interval_s), 1e-3, 1e6, 0, 0, "faults", "heartbeat period, s"},
    {"heartbeat-missed", OPT_INT, F(heartbeat_missed), 1, 1000, 0, 0, "faults",
     "beats without progress that declare a hang"},
    {"straggler-detect-s", OPT_REAL, F(straggler_detect_s), 0, 1e7, 0, 0, "faults",
     "time the straggler detector needs to name a slow host, s"},
    {"selfcheck-s", OPT_REAL, F(selfcheck_s), 0, 1e6, 0, 0, "faults",
     "self-check diagnostics after a failure (loopback, NCCL tests), s"},
    {"evict-s", OPT_REAL, F(evict_s), 0, 1e6, 0, 0, "faults", "evict a node and bring a spare in, s"},
    {"repair-h", OPT_REAL, F(repair_h), 1e-3, 1e5, 0, 0, "faults", "an evicted node back in the spare pool, h"},
    {"repair-wait-h", OPT_REAL, F(repair_wait_h), 0, 1e5, 0, 0, "faults",
     "the job's wait for a component repaired in place (recovery 'repair'), h"},
    {"relaunch-s", OPT_REAL, F(relaunch_s), 0, 1e6, 0, 0, "faults", "job relaunch up to the first collective, s"},
    {"init-design", OPT_ENUM, F(init_design), 0, 0, 0, "tcpstore|redis|nobarrier", "faults",
     "collective initialisation: TCPStore with global barriers, Redis with them, no global barriers"},
    {"store-op-tcpstore-us", OPT_REAL, F(store_op_tcpstore_us), 1e-3, 1e7, 0, 0, "faults",
     "one rank's turn at a barrier through TCPStore, us"},
    {"store-op-redis-us", OPT_REAL, F(store_op_redis_us), 1e-3, 1e7, 0, 0, "faults",
     "one rank's turn at a barrier through Redis, us"},
    {"nccl-comm-init-s", OPT_REAL, F(nccl_comm_init_s), 0, 1e5, 0, 0, "faults",
     "one NCCL communicator's bootstrap, s"},
    {"ckpt-load", OPT_ENUM, F(ckpt_load), 0, 0, 0, "one-per-dp-group|every-rank", "faults",
     "checkpoint load: one reader per DP group and a broadcast, or every rank reading"},
    {"storage-read-gbps", OPT_REAL, F(storage_read_gbps), 1e-3, 1e9, 0, 0, "faults",
     "shared storage read bandwidth, whole cluster, GB/s"},
    {"storage-write-gbps", OPT_REAL, F(storage_write_gbps), 1e-3, 1e9, 0, 0, "faults",
     "shared storage write bandwidth, whole cluster, GB/s"},
    {"node-storage-gbps", OPT_REAL, F(node_storage_gbps), 1e-3, 1e6, 0, 0, "faults",
     "one node's bandwidth to storage, GB/s"},
    {"pcie-gbps", OPT_REAL, F(pcie_gbps), 1e-3, 1e6, 0, 0, "faults", "one GPU to host memory, GB/s"},
    {"ckpt-sync-s", OPT_REAL, F(ckpt_sync_s), 0, 1e5, 0, 0, "faults",
     "checkpoint stage one beside the copy (barrier, serialisation), s"},
    {"slow-host-fraction", OPT_REAL, F(slow_host_fraction), 1e-9, 1, 0, OPT_ZERO_OK, "faults",
     "share of hosts that run slow (stragglers)"},
    {"slow-host-factor", OPT_REAL, F(slow_host_factor), 1, 1000, 0, 0, "faults",
     "compute time multiplier of a slow host"},
};
const opt_table hw_faults_opts = {fault_defs, sizeof fault_defs / sizeof fault_defs[0], "fault model"};

int fault_check(const hw_faults_t *f, char *err)
{
    double sum = 0;
    for (int i = 0; i < FAULT_NRATES; i++) {
        sum += f->rate[i];
        if (f->detect[i] == DETECT_STRAGGLER && f->recover[i] == RECOVER_RESTART) {
            snprintf(err, OPT_ERR_LEN, "faults: %s_detect = straggler with %s_recovery = restart: a slow component "
                     "restarted in place is still slow; allowed with straggler: evict or repair",
                     fault_cause_names[i], fault_cause_names[i]);
            return -1;
        }
    }
    if (!(sum > 0) && !(f->slow_host_fraction > 0)) {
        snprintf(err, OPT_ERR_LEN, "faults: every failure rate is 0 and slow_host_fraction is 0: nothing can fail; "
                 "give at least one rate above 0 (ETTR would be 1 by construction)");
        return -1;
    }
    return 0;
}

double fault_rate_per_s(const hw_faults_t *f, int cause, int nodes)
{
    return cause < FAULT_NRATES ? f->rate[cause] / 1000.0 * nodes / 86400.0 : 0;
}

/* ---- the restart path ------------------------------------------------- */

/* Megatron-Core's initialize_model_parallel makes every group of each
 * kind on every rank (torch.distributed.new_group is collective over the
 * world): DP groups (TP x PP of them), TP (N/TP), PP (N/PP), embedding
 * and position-embedding (one per PP group each), model-parallel (DP),
 * and the DP groups with context parallelism folded in (TP x PP again). */
int fault_init_groups(const fault_job_t *j)
{
    int n = j->num_gpus;
    return 2 * j->tp * j->pp + n / j->tp + 3 * (n / j->pp) + j->dp;
}

/* The groups one rank belongs to and initialises NCCL for (lazily, on
 * first use): TP, PP, DP, model-parallel, embedding (first and last
 * stages; counted for all). */
static int groups_per_rank(const fault_job_t *j)
{
    return (j->tp > 1) + (j->pp > 1) + (j->dp > 1) + 2;
}

/* With global barriers (MegaScale's Megatron-LM baseline and its Redis
 * variant): every group creation is a barrier in which each of the N
 * ranks takes its turn at the single store, so N x groups turns one after
 * another: O(N^2). Without them: each rank registers once (N turns through
 * the faster store) and then bootstraps its own communicators: O(N). */
double fault_init_s(const hw_faults_t *f, const fault_job_t *j, int design)
{
    double n = j->num_gpus, nccl = groups_per_rank(j) * f->nccl_comm_init_s;
    if (design == INIT_NOBARRIER)
        return n * f->store_op_redis_us * 1e-6 + nccl;
    double op_us = design == INIT_TCPSTORE ? f->store_op_tcpstore_us : f->store_op_redis_us;
    return fault_init_groups(j) * n * op_us * 1e-6 + nccl;
}

static double fmin3(double a, double b, double c) { return fmin(a, fmin(b, c)); }

/* Readers share the storage; each is also bound by its node's own path.
 * One reader per DP group: TP x PP readers (one per model shard, spread
 * one per node) read one copy of everything, then each sends its shard
 * to the rest of its DP group (a pipelined broadcast: one shard's time at
 * the GPU's NIC share). Every rank reading: the weights once per DP
 * replica, every byte through its own node. */
double fault_load_s(const hw_faults_t *f, const fault_job_t *j, int design)
{
    int nodes = layout_nodes(j->num_gpus, j->gpus_per_node);
    if (design == LOAD_EVERY_RANK) {
        double bytes = j->ckpt_gpu_bytes * j->num_gpus;
        double bw = fmin(f->storage_read_gbps, nodes * f->node_storage_gbps) * 1e9;
        return bytes / bw;
    }
    int readers = j->tp * j->pp, reader_nodes = readers < nodes ? readers : nodes;
    double bw = fmin3(f->storage_read_gbps, reader_nodes * f->node_storage_gbps,
                      readers * j->nic_gbytes_per_gpu) * 1e9;
    double bcast = j->dp > 1 ? j->ckpt_gpu_bytes / (j->nic_gbytes_per_gpu * 1e9) : 0;
    return j->ckpt_unique_bytes / bw + bcast;
}

void fault_costs(const hw_faults_t *f, const fault_job_t *j, fault_costs_t *c)
{
    memset(c, 0, sizeof *c);
    int nodes = layout_nodes(j->num_gpus, j->gpus_per_node);
    for (int i = 0; i < FAULT_NCAUSES; i++) {
        int det = i == FAULT_STRAGGLER ? DETECT_STRAGGLER : f->detect[i];
        int rec = i == FAULT_STRAGGLER ? RECOVER_EVICT : f->recover[i];
        c->detect_s[i] = det == DETECT_ERROR       ? f->error_report_s
                         : det == DETECT_HEARTBEAT ? f->heartbeat_interval_s * f->heartbeat_missed
                                                   : f->straggler_detect_s;
        c->diagnose_s[i] = f->selfcheck_s + (rec == RECOVER_EVICT ? f->evict_s : 0);
    }
    c->relaunch_s = f->relaunch_s;
    c->init_s = fault_init_s(f, j, f->init_design);
    c->load_s = fault_load_s(f, j, f->ckpt_load);
    c->stage1_s = f->ckpt_sync_s + j->ckpt_gpu_bytes / (f->pcie_gbps * 1e9);
    /* Stage two: one copy of every shard to storage, written by the nodes
     * that hold them (all nodes share the work). */
    c->stage2_s = j->ckpt_unique_bytes / (fmin(f->storage_write_gbps, nodes * f->node_storage_gbps) * 1e9);
    c->repair_wait_s = f->repair_wait_h * 3600;
}

/* ---- expectations ------------------------------------------------------ */

double fault_ettr_renewal(const fault_renewal_t *m)
{
    double wall = m->slow * m->interval_s + m->stall_s, r = m->rate_per_s;
    if (!(r > 0))
        return m->interval_s / wall;
    /* expm1 keeps precision when r L is small */
    return m->interval_s / ((1 / r + m->down_s) * expm1(r * wall));
}

double fault_ettr_first_order(const fault_renewal_t *m)
{
    double wall = m->slow * m->interval_s + m->stall_s;
    double lost = m->rate_per_s * (wall / 2 + m->down_s) + m->stall_s / wall;
    return fmax(0, 1 - lost) / m->slow;
}

double fault_young_daly_s(double stall_s, double rate_per_s)
{
    return sqrt(2 * stall_s / rate_per_s);
}

double fault_best_interval_renewal(const fault_renewal_t *m)
{
    /* ETTR is unimodal in the interval: golden section in log space
     * between a second and a year. */
    fault_renewal_t x = *m;
    double a = 0, b = log(3.15e7), g = (sqrt(5) - 1) / 2;
    for (int it = 0; it < 100; it++) {
        double c = b - g * (b - a), d = a + g * (b - a);
        x.interval_s = exp(c);
        double fc = fault_ettr_renewal(&x);
        x.interval_s = exp(d);
        double fd = fault_ettr_renewal(&x);
        if (fc > fd)
            b = d;
        else
            a = c;
    }
    return exp((a + b) / 2);
}

/* fault: the fault model of a cluster (the "faults" section of a hardware
 * profile) and the price of everything around a failure, by mechanism:
 * how often each component fails, how the failure is seen (an explicit
 * error, a heartbeat timeout, the straggler detector), what recovery it
 * needs (restart in place, evict the node for a spare, wait for a repair),
 * and the seconds of each step of the restart path: detection, self-check
 * diagnostics, eviction, relaunch, collective initialisation (three
 * designs, MegaScale section 4), checkpoint load (one reader per DP group
 * and a broadcast, or every rank reading), the checkpoint's two stages.
 * Also the analytic expectation of ETTR (renewal-reward) and Young/Daly's
 * interval. The numbers' sources: fault_builtin.c. Pure C, no I/O. */
#ifndef MODEL_FAULT_H
#define MODEL_FAULT_H

#include "model/opts.h"

/* Components that fail (reliability-data.md groups Llama 3's Table 5 into
 * these). FAULT_STRAGGLER is not a rate of the profile: it is the slow
 * hosts found by the straggler detector (slow_host_fraction). */
typedef enum {
    FAULT_GPU, FAULT_HBM, FAULT_HOST, FAULT_NIC, FAULT_SWITCH, FAULT_SOFTWARE, FAULT_SDC, FAULT_NRATES,
    FAULT_STRAGGLER = FAULT_NRATES, FAULT_NCAUSES
} fault_cause_t;

typedef enum { DETECT_ERROR, DETECT_HEARTBEAT, DETECT_STRAGGLER } fault_detect_t;
typedef enum { RECOVER_RESTART, RECOVER_EVICT, RECOVER_REPAIR } fault_recover_t;
typedef enum { INIT_TCPSTORE, INIT_REDIS, INIT_NOBARRIER } fault_init_t;
typedef enum { LOAD_ONE_PER_DP_GROUP, LOAD_EVERY_RANK } fault_load_t;

typedef struct {
    int present;                  /* 0: the profile has no fault model (a custom
                                     cluster without a "faults" section) */
    char base[40];                /* built-in cluster the defaults came from, or "" */
    double rate[FAULT_NRATES];    /* failures per 1000 node-days, each component */
    int detect[FAULT_NRATES];     /* fault_detect_t */
    int recover[FAULT_NRATES];    /* fault_recover_t */
    double error_report_s;        /* an explicit error reaches the driver */
    double heartbeat_interval_s;
    int heartbeat_missed;         /* missed beats (no progress) that declare a hang */
    double straggler_detect_s;    /* a slowdown found by the straggler detector */
    double selfcheck_s;           /* loopback and NCCL tests in a node and with neighbours */
    double evict_s;               /* drain the bad node, bring a spare into the job */
    double repair_h;              /* an evicted node back in the spare pool */
    double repair_wait_h;         /* a component fixed in place (RECOVER_REPAIR) */
    double relaunch_s;            /* scheduler, containers, processes, imports */
    int init_design;              /* fault_init_t */
    double store_op_tcpstore_us;  /* one rank's turn at a global barrier, TCPStore */
    double store_op_redis_us;     /* the same through Redis */
    double nccl_comm_init_s;      /* one communicator's NCCL bootstrap */
    int ckpt_load;                /* fault_load_t */
    double storage_read_gbps, storage_write_gbps; /* shared storage, whole cluster, GB/s */
    double node_storage_gbps;     /* one node's path to storage, GB/s */
    double pcie_gbps;             /* one GPU to host memory, GB/s (checkpoint stage one) */
    double ckpt_sync_s;           /* stage one beside the copy: the ranks' barrier, the
                                     state's serialisation */
    double slow_host_fraction;    /* hosts about slow_host_factor slower (MegaScale) */
    double slow_host_factor;
} hw_faults_t;

extern const opt_table hw_faults_opts;
extern const char *const fault_cause_names[FAULT_NCAUSES]; /* "gpu", ..., "straggler" */

/* The built-in fault model of a built-in cluster; -1 for another name. */
int fault_builtin(const char *cluster, hw_faults_t *f);

/* Cross-field checks of a fault model that is present. 0, or -1 with err. */
int fault_check(const hw_faults_t *f, char *err);

/* Failures per second of one cause over `nodes` nodes (0 for straggler). */
double fault_rate_per_s(const hw_faults_t *f, int cause, int nodes);

/* ---- the restart path ------------------------------------------------- */

/* The job's shape as the restart path sees it. */
typedef struct {
    int num_gpus, gpus_per_node, tp, pp, dp;
    double nic_gbytes_per_gpu;    /* one GPU's share of its node's NICs, GB/s */
    double ckpt_gpu_bytes;        /* one GPU's checkpointed state (weights, optimizer) */
    double ckpt_unique_bytes;     /* the whole checkpoint, one copy of every shard */
} fault_job_t;

/* Seconds of each step; load and init for the profile's designs. */
typedef struct {
    double detect_s[FAULT_NCAUSES];
    double diagnose_s[FAULT_NCAUSES]; /* self-check, plus eviction where evicted */
    double relaunch_s, init_s, load_s;
    double stage1_s, stage2_s;        /* checkpoint: GPU to host (stalls), host to storage */
    double repair_wait_s;             /* RECOVER_REPAIR's wait */
} fault_costs_t;

/* Communicator-group creations Megatron-Core makes at start (each a global
 * barrier through the store in the first two designs). */
int fault_init_groups(const fault_job_t *j);
/* Collective-group initialisation with `design` at the job's size. */
double fault_init_s(const hw_faults_t *f, const fault_job_t *j, int design);
/* Checkpoint load with `design`. */
double fault_load_s(const hw_faults_t *f, const fault_job_t *j, int design);
void fault_costs(const hw_faults_t *f, const fault_job_t *j, fault_costs_t *c);

/* ---- expectations ------------------------------------------------------ */

/* The analytic model of one run: failures arrive as one Poisson process
 * (rate_per_s, all causes) while the job runs, never during a recovery;
 * every recovery takes down_s on average; every interval_s of training
 * ends with a stall_s checkpoint; spares never run out. */
typedef struct {
    double rate_per_s, down_s, interval_s, stall_s;
    double slow;                  /* wall seconds per second of healthy work (stragglers kept) */
} fault_renewal_t;

/* Exact renewal-reward ETTR under those assumptions: an interval of work
 * and its checkpoint (L = slow x interval + stall wall seconds) succeed
 * after an expected (1/rate + down)(exp(rate L) - 1) seconds. */
double fault_ettr_renewal(const fault_renewal_t *m);
/* The first-order form (at most one failure per interval, none during a
 * checkpoint or a recovery): 1 - rate (L/2 + down) - stall/interval,
 * divided by slow (0 where that goes below 0). Parts from the exact one
 * when L or down nears 1/rate. */
double fault_ettr_first_order(const fault_renewal_t *m);
/* Young/Daly: sqrt(2 x stall x MTBF). */
double fault_young_daly_s(double stall_s, double rate_per_s);
/* The interval that maximises fault_ettr_renewal (golden section). */
double fault_best_interval_renewal(const fault_renewal_t *m);

#endif

/* fault_builtin: the built-in fault model of each built-in cluster, each
 * number with its source in ../shared/reliability-data.md (L3: Llama 3,
 * MS: MegaScale) or marked assumed where nothing public gives it. A
 * profile's "faults" section replaces any of them. */
#include "model/fault.h"

#include <stdio.h>
#include <string.h>

/* Llama 3 405B, Table 5: 419 unexpected interruptions in 54 days on 16,384
 * H100s (2,048 servers; the GPU count of the window is not stated), so one
 * failure per 1000 server-days is 2,048 x 54 / 1000 = 110.6 failures. The
 * table's rows grouped into our components (counts as printed; the
 * "faulty GPU" row's 148 is used, not its 30.1%: the counts sum to 419):
 * - gpu: faulty GPU 148, SRAM 19, system processor 17, thermal 6 = 190;
 * - hbm: 72; nic: 7; switch/cable: 35; sdc: 6;
 * - host: host maintenance 32, SSD 3, power 3, chassis 2, IO board 2,
 *   CPU 2, system memory 2 = 46;
 * - software: software bug 54, dependency 2, NCCL watchdog 7 = 63.
 * MegaScale publishes no breakdown (MS: "failure breakdown not
 * published"); its cluster gets the same rates: 3.79 per 1000 node-days
 * in all, against RSC-1's 6.50 and RSC-2's 2.34 (A100). */
static void llama3_rates(hw_faults_t *f)
{
    static const struct { int cause; double count; int detect, recover; } rows[] = {
        /* GPU and HBM errors are Xid / ECC errors the runtime reports at
         * once; the node is evicted (its GPU replaced). */
        {FAULT_GPU, 190, DETECT_ERROR, RECOVER_EVICT},
        {FAULT_HBM, 72, DETECT_ERROR, RECOVER_EVICT},
        /* A host that goes down stops its heartbeats. */
        {FAULT_HOST, 46, DETECT_HEARTBEAT, RECOVER_EVICT},
        /* A NIC or link that fails leaves collectives hanging until the
         * heartbeat (progress) timeout; a switch or cable is routed around
         * by the fabric (1:1, several paths) and the job restarts in
         * place; the part is replaced outside the job. */
        {FAULT_NIC, 7, DETECT_HEARTBEAT, RECOVER_EVICT},
        {FAULT_SWITCH, 35, DETECT_HEARTBEAT, RECOVER_RESTART},
        /* Software: crashes and NCCL hangs, half of each at best seen as
         * errors; counted as hangs (the slower detection). */
        {FAULT_SOFTWARE, 63, DETECT_HEARTBEAT, RECOVER_RESTART},
        /* Silent data corruption, once found (loss spike, NaN check,
         * Llama 3's diagnosis), evicts the node. */
        {FAULT_SDC, 6, DETECT_ERROR, RECOVER_EVICT},
    };
    double per_1000_node_days = 2048.0 * 54.0 / 1000.0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        f->rate[rows[i].cause] = rows[i].count / per_1000_node_days;
        f->detect[rows[i].cause] = rows[i].detect;
        f->recover[rows[i].cause] = rows[i].recover;
    }
}

/* The restart path's steps. MegaScale gives totals only: detection plus
 * self-check diagnostics under 10 minutes on average, catch-up (relaunch,
 * initialisation, load, redone work) under 15 minutes (MS section 4);
 * the split below is assumed, sized so that its sums stay inside them. */
static void restart_path(hw_faults_t *f)
{
    f->error_report_s = 10;          /* assumed: the next message to the driver */
    f->heartbeat_interval_s = 30;    /* assumed */
    f->heartbeat_missed = 10;        /* assumed: 5 minutes without progress, half
                                        PyTorch's 10-minute NCCL timeout default */
    f->straggler_detect_s = 1800;    /* assumed: half an hour of per-rank timings */
    f->selfcheck_s = 180;            /* assumed: loopback and NCCL tests, MS section 4 */
    f->evict_s = 60;                 /* assumed */
    f->repair_h = 48;                /* assumed: no published figure */
    f->repair_wait_h = 1;            /* assumed: no published figure */
    f->relaunch_s = 180;             /* assumed: scheduler, containers, imports */
    /* MS section 4, collective initialisation on 2,048 GPUs: 1,047 s with
     * Megatron-LM's TCPStore, 361 s with Redis, under 5 s without global
     * barriers. With the paper's 175B plan at that size (TP 8, PP 8, DP 32:
     * 1,184 group creations, fault_init_groups) and 5 communicators per
     * rank at nccl_comm_init_s each, a barrier turn is (1047 - 1.5) /
     * (1,184 x 2,048) = 431 us through TCPStore and (361 - 1.5) / (1,184 x
     * 2,048) = 148 us through Redis: two numbers derived from the paper's
     * two figures. The no-barrier design and 12,288 GPUs are predictions. */
    f->store_op_tcpstore_us = 431;
    f->store_op_redis_us = 148;
    f->nccl_comm_init_s = 0.3;       /* assumed: a communicator's bootstrap at small scale */
    /* L3 section 3.3.1: Tectonic, 2 TB/s sustained (7 TB/s peak) for up to
     * 16K GPUs, read and write alike. */
    f->storage_read_gbps = f->storage_write_gbps = 2000;
    f->node_storage_gbps = 25;       /* assumed: a 200 Gb/s front-end NIC per node */
    f->pcie_gbps = 25;               /* PCIe Gen4 x16 (32 GB/s line rate), ~25 GB/s achieved */
    /* MS section 4: stage one (GPU to host) takes "several seconds"; the
     * copy of a 175B shard is a fifth of a second at 25 GB/s, so most of
     * it is the rest (a barrier, the state's serialisation): assumed 3 s. */
    f->ckpt_sync_s = 3;
    /* MS section 5: about 0.5% of hosts ran about 10% slower. */
    f->slow_host_fraction = 0.005;
    f->slow_host_factor = 1.1;
}

int fault_builtin(const char *cluster, hw_faults_t *f)
{
    memset(f, 0, sizeof *f);
    if (strcmp(cluster, "megascale") && strcmp(cluster, "fattree"))
        return -1;
    f->present = 1;
    snprintf(f->base, sizeof f->base, "%s", cluster);
    llama3_rates(f);
    restart_path(f);
    if (!strcmp(cluster, "megascale")) {
        /* MegaScale's own designs: no global barriers, one reader per DP
         * group and a broadcast (MS section 4). */
        f->init_design = INIT_NOBARRIER;
        f->ckpt_load = LOAD_ONE_PER_DP_GROUP;
    } else {
        /* The generic cluster runs Megatron-LM as MegaScale measured it:
         * TCPStore with global barriers, every rank reading its state. */
        f->init_design = INIT_TCPSTORE;
        f->ckpt_load = LOAD_EVERY_RANK;
    }
    return 0;
}

/* sim/bench_net.c: sim_net_bench, timings of the network model at MegaScale
 * size (default 1,536 nodes = 12,288 GPUs on the 3-tier Clos). Not a test:
 * prints wall-clock seconds per scenario and the simulated times.
 *
 * Scenarios (all flows of a scenario start at t = 0 on an idle network):
 *   dp-ring-step: one step of MegaScale's 64 concurrent DP rings (8 rails x
 *     8 PP stages, 192 nodes each, neighbours on one rail): 12,288 flows;
 *   permutation: GPU g sends to a random other GPU (mostly through the
 *     spine): 12,288 flows;
 *   permutation+1ns: the same, GPU g starting at t = g ns, so every start
 *     is its own event and forces a max-min update before the next one;
 *   dp-allreduce: the 64 rings' full all-reduce, 2 x 191 steps, each step
 *     starting when the previous step's flows all completed.
 * Usage: sim_net_bench [nodes] [allreduce_steps]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "sim/net.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { GPN = 8, DP_NODES = 192 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Destination of GPU g in a DP ring step: the same rail on the next node of
 * its 192-node PP stage (wrapping). Nodes beyond the last full stage: none. */
static int ring_next(int g, int nodes) {
  int node = g / GPN, stage = node / DP_NODES;
  if ((stage + 1) * DP_NODES > nodes) return -1;
  int next = stage * DP_NODES + (node - stage * DP_NODES + 1) % DP_NODES;
  return next * GPN + g % GPN;
}

static int *perm_dst(int gpus) {
  int *d = malloc((size_t)gpus * sizeof *d);
  uint64_t s = 12345;
  for (int i = 0; i < gpus; i++) d[i] = i;
  for (int i = gpus - 1; i > 0; i--) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int j = (int)((s >> 33) % (uint64_t)(i + 1)), t = d[i];
    d[i] = d[j], d[j] = t;
  }
  return d;
}

/* Play the network until idle; returns completions seen, *t_end the last. */
static long drain(sim_net *net, uint64_t *t_end, long *events) {
  uint64_t t;
  sim_net_done d;
  long n = 0;
  while (sim_net_next_event(net, &t)) {
    sim_net_advance(net, t);
    (*events)++;
    while (sim_net_pop_done(net, &d)) n++, *t_end = d.t_done_ns;
  }
  return n;
}

/* Start one flow per GPU (dst from `dst` or the ring) at the current time,
 * or GPU g at current time + g x stagger_ns. */
static int start_all(sim_net *net, const int *dst, uint64_t bytes, int nodes, uint64_t stagger_ns) {
  int gpus = sim_net_gpus(net), n = 0;
  uint64_t t0 = sim_net_now(net);
  for (int g = 0; g < gpus; g++) {
    int to = dst ? dst[g] : ring_next(g, nodes);
    if (to < 0 || to == g) continue;
    if (sim_net_flow_start(net, g, to, bytes, (uint64_t)g, t0 + (uint64_t)g * stagger_ns) < 0) {
      fprintf(stderr, "flow_start failed\n");
      exit(1);
    }
    n++;
  }
  return n;
}

static void report_top_link(sim_net *net) {
  int best = -1;
  sim_net_link_stats st, bs = {0};
  for (int l = 0; l < sim_net_link_count(net); l++) {
    sim_net_link_stats_get(net, l, &st);
    if (st.max_flows > bs.max_flows || (st.max_flows == bs.max_flows && st.full_ns > bs.full_ns))
      bs = st, best = l;
  }
  char name[96];
  sim_net_link_name(net, best, name, sizeof name);
  printf("    most shared link: [%s] max %d flows, full for %" PRIu64 " ns of %" PRIu64 " busy\n",
         name, bs.max_flows, bs.full_ns, bs.busy_ns);
}

static void scenario(const char *name, int nodes, sim_net_ecmp ecmp, const int *dst, uint64_t bytes,
                     uint64_t stagger_ns) {
  sim_net_cfg cfg;
  char err[256];
  sim_net_cfg_megascale(&cfg, nodes);
  cfg.ecmp = ecmp;
  double t0 = now_s();
  sim_net *net = sim_net_new(&cfg, err, sizeof err);
  if (!net) fprintf(stderr, "%s\n", err), exit(1);
  double t1 = now_s();
  int n = start_all(net, dst, bytes, nodes, stagger_ns);
  uint64_t first, t_end = 0;
  sim_net_next_event(net, &first); /* the first max-min computation */
  double t2 = now_s();
  long events = 0, done = drain(net, &t_end, &events);
  double t3 = now_s();
  printf("%-13s %-5s flows %6d: build %.3f s, start+rates %.3f s, run %.3f s (%ld events), "
         "total %.3f s; sim end %.1f us\n", name, ecmp == SIM_NET_ECMP_HASH ? "hash" : "ideal", n,
         t1 - t0, t2 - t1, t3 - t2, events, t3 - t0, 1e-3 * (double)t_end);
  if (done != n) fprintf(stderr, "only %ld of %d flows completed\n", done, n), exit(1);
  report_top_link(net);
  sim_net_free(net);
}

/* The full DP all-reduce of the 64 rings, step-synchronous. */
static void allreduce(int nodes, int steps, uint64_t bytes) {
  sim_net_cfg cfg;
  char err[256];
  sim_net_cfg_megascale(&cfg, nodes);
  sim_net *net = sim_net_new(&cfg, err, sizeof err);
  if (!net) fprintf(stderr, "%s\n", err), exit(1);
  double t0 = now_s();
  long flows = 0, events = 0;
  uint64_t t_end = 0;
  for (int s = 0; s < steps; s++) {
    flows += start_all(net, NULL, bytes, nodes, 0);
    drain(net, &t_end, &events);
  }
  double dt = now_s() - t0;
  printf("dp-allreduce  hash  %d steps x 12288 flows = %ld flows: %.3f s (%.2f M flows/s, %ld events);"
         " sim %.3f ms\n", steps, flows, dt, 1e-6 * (double)flows / dt, events, 1e-6 * (double)t_end);
  sim_net_free(net);
}

int main(int argc, char **argv) {
  int nodes = argc > 1 ? atoi(argv[1]) : 1536;
  int steps = argc > 2 ? atoi(argv[2]) : 2 * (DP_NODES - 1);
  if (nodes < DP_NODES) fprintf(stderr, "nodes must be >= %d\n", DP_NODES), exit(1);
  printf("network: MegaScale Clos, %d nodes, %d GPUs; 1 MiB per flow\n", nodes, nodes * GPN);
  int *perm = perm_dst(nodes * GPN);
  scenario("dp-ring-step", nodes, SIM_NET_ECMP_HASH, NULL, 1u << 20, 0);
  scenario("dp-ring-step", nodes, SIM_NET_ECMP_IDEAL, NULL, 1u << 20, 0);
  scenario("dp-ring+1ns", nodes, SIM_NET_ECMP_HASH, NULL, 1u << 20, 1);
  scenario("permutation", nodes, SIM_NET_ECMP_HASH, perm, 1u << 20, 0);
  scenario("permutation", nodes, SIM_NET_ECMP_IDEAL, perm, 1u << 20, 0);
  scenario("perm+1ns", nodes, SIM_NET_ECMP_HASH, perm, 1u << 20, 1);
  scenario("perm+1ns", nodes, SIM_NET_ECMP_IDEAL, perm, 1u << 20, 1);
  if (steps > 0) allreduce(nodes, steps, 1u << 20);
  free(perm);
  return 0;
}

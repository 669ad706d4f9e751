/* tests/sim/test_net.c: the network model. Each case builds a small network,
 * states the expected value worked out by hand in a comment, and prints
 * expected vs got. Run one case: test_sim_net <case>. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "sim/net.h"

#include "../check.h"

#include <string.h>

/* Default latencies of sim_net_cfg_megascale (ns). */
enum { LAT_NVL = 1000, LAT_NIC = 2000, LAT_SW = 500 };
/* MegaScale NIC: 200 Gb/s = 25 bytes/ns; ToR uplink 400 Gb/s = 50 bytes/ns. */
#define NIC_BPNS 25.0

static sim_net *make(const sim_net_cfg *cfg) {
  char err[256];
  sim_net *net = sim_net_new(cfg, err, sizeof err);
  CHECK(net, "sim_net_new: %s", err);
  return net;
}

static sim_net *make_megascale(int nodes, sim_net_ecmp ecmp) {
  sim_net_cfg cfg;
  sim_net_cfg_megascale(&cfg, nodes);
  cfg.ecmp = ecmp;
  return make(&cfg);
}

/* GPU index of (node, local) with 8 GPUs per node. */
static int G(int node, int local) { return node * 8 + local; }

/* Run the network until idle; records completion time per flow id. */
static int run_all(sim_net *net, uint64_t *t_done, int max_id) {
  uint64_t t;
  sim_net_done d;
  int n = 0;
  while (sim_net_next_event(net, &t)) {
    sim_net_advance(net, t);
    while (sim_net_pop_done(net, &d)) {
      CHECK(d.flow < max_id, "flow id %d out of range", d.flow);
      t_done[d.flow] = d.t_done_ns, n++;
    }
  }
  return n;
}

static int32_t start(sim_net *net, int src, int dst, uint64_t bytes, uint64_t tag, uint64_t t) {
  int32_t id = sim_net_flow_start(net, src, dst, bytes, tag, t);
  CHECK(id >= 0, "flow_start %d -> %d failed: %d", src, dst, id);
  return id;
}

static double rate_of(sim_net *net, int32_t id) {
  sim_net_flow_info fi;
  CHECK(sim_net_flow_get(net, id, &fi) == 0, "flow %d not live", id);
  return fi.rate_Bps;
}

/* ---- share ---------------------------------------------------------------- */

static void test_share(void) {
  /* 8 nodes: one ToR per rail; same-rail inter-node path = NIC, ToR, NIC:
   * alpha = lat_nic + 1 switch = 2000 + 500 = 2500 ns. */
  const uint64_t alpha = LAT_NIC + LAT_SW, B = 1000000;
  sim_net *net = make_megascale(8, SIM_NET_ECMP_HASH);
  uint64_t t[16];
  printf("alone: one 1e6-byte flow node0 -> node1 on rail 0\n");
  start(net, G(0, 0), G(1, 0), B, 0, 0);
  run_all(net, t, 16);
  /* 1e6 B / 25 B/ns = 40000 ns, + 2500 */
  check_eq("t_done", B / 25 + alpha, t[0], "bytes/nic_Bps + alpha = 40000 + 2500");

  printf("two flows out of one NIC (node0 -> node1, node0 -> node2)\n");
  uint64_t t0 = sim_net_now(net);
  int32_t a = start(net, G(0, 0), G(1, 0), B, 0, t0), b = start(net, G(0, 0), G(2, 0), B, 0, t0);
  check_near("rate of each (B/s)", 12.5e9, rate_of(net, a), 0, 1e-12, "nic 25e9 B/s / 2");
  check_near("rate of the other (B/s)", 12.5e9, rate_of(net, b), 0, 1e-12, "nic 25e9 B/s / 2");
  run_all(net, t, 16);
  /* 2 x 1e6 / 25 = 80000 ns, + 2500 */
  check_eq("t_done first", t0 + 2 * B / 25 + alpha, t[a], "2 bytes/cap + alpha");
  check_eq("t_done second", t0 + 2 * B / 25 + alpha, t[b], "2 bytes/cap + alpha");

  printf("two flows out of one GPU's NVLink (gpu0 -> gpu1, gpu0 -> gpu2)\n");
  t0 = sim_net_now(net);
  a = start(net, 0, 1, 3 * B, 0, t0), b = start(net, 0, 2, 3 * B, 0, t0);
  run_all(net, t, 16);
  /* 300 B/ns shared by 2: 3e6 / 150 = 20000 ns, + lat_nvlink 1000 */
  check_eq("t_done nvlink", t0 + 20000 + LAT_NVL, t[a], "3e6/(300/2) + 1000");
  check_eq("t_done nvlink other", t0 + 20000 + LAT_NVL, t[b], "3e6/(300/2) + 1000");

  /* Max-min worked by hand. nic_up(node0) carries f1 (->node1), f2
   * (->node2), f3 (->node3); nic_down(node3) carries f3, f4 (node4), f5
   * (node5), f6 (node6). Fair shares: nic_down(node3) 25/4 = 6.25 B/ns is the
   * smallest, so f3..f6 get 6.25; nic_up(node0) then has 25 - 6.25 = 18.75
   * left for f1, f2: 9.375 each. f1, f2 end at 1e6/9.375 = 106666.7 -> 106667
   * ns; f3 keeps 6.25 (still 4 flows into node3): 1e6/6.25 = 160000 ns. */
  printf("max-min: f1,f2,f3 share nic_up(node0); f3 is also one of 4 flows into node3\n");
  t0 = sim_net_now(net);
  int32_t f[6];
  f[0] = start(net, G(0, 0), G(1, 0), B, 0, t0);
  f[1] = start(net, G(0, 0), G(2, 0), B, 0, t0);
  f[2] = start(net, G(0, 0), G(3, 0), B, 0, t0);
  for (int i = 3; i < 6; i++) f[i] = start(net, G(i + 1, 0), G(3, 0), B, 0, t0);
  check_near("rate f1 (B/s)", 9.375e9, rate_of(net, f[0]), 0, 1e-12, "(25 - 6.25)/2 B/ns");
  check_near("rate f2 (B/s)", 9.375e9, rate_of(net, f[1]), 0, 1e-12, "(25 - 6.25)/2 B/ns");
  check_near("rate f3 (B/s)", 6.25e9, rate_of(net, f[2]), 0, 1e-12, "25/4 at nic_down(node3)");
  check_near("rate f4 (B/s)", 6.25e9, rate_of(net, f[3]), 0, 1e-12, "25/4 at nic_down(node3)");
  run_all(net, t, 16);
  check_eq("t_done f1", t0 + 106667 + alpha, t[f[0]], "ceil(1e6/9.375) + alpha");
  check_eq("t_done f2", t0 + 106667 + alpha, t[f[1]], "ceil(1e6/9.375) + alpha");
  check_eq("t_done f3", t0 + 160000 + alpha, t[f[2]], "1e6/6.25 + alpha");
  check_eq("t_done f6", t0 + 160000 + alpha, t[f[5]], "1e6/6.25 + alpha");

  printf("degenerate flows: 0 bytes across nodes, src == dst\n");
  t0 = sim_net_now(net);
  a = start(net, G(0, 0), G(1, 0), 0, 0, t0), b = start(net, 5, 5, B, 0, t0);
  run_all(net, t, 16);
  check_eq("t_done 0 bytes", t0 + alpha, t[a], "latency only");
  check_eq("t_done src == dst", t0, t[b], "no path, no time");
  sim_net_free(net);
}

/* ---- route ---------------------------------------------------------------- */

static void show_path(const sim_net *net, const sim_net_path *p) {
  char name[96];
  printf("    path:");
  for (int i = 0; i < p->nlinks; i++) sim_net_link_name(net, p->link[i], name, sizeof name), printf(" [%s]", name);
  printf("\n");
}

static void expect_route(sim_net *net, const char *what, int src, int dst, int links, int sw,
                         const int *kinds) {
  sim_net_path p;
  sim_net_link_stats st;
  CHECK(sim_net_route(net, src, dst, 0, &p) == 0, "route");
  printf("%s (gpu %d -> gpu %d)\n", what, src, dst);
  show_path(net, &p);
  check_eq("links", links, p.nlinks, "hop list in net.h");
  check_eq("switches", sw, p.nswitches, "ToR=1, ToR-agg-ToR=3, via spine=5");
  check_eq("latency ns", sw ? LAT_NIC + sw * LAT_SW : LAT_NVL, p.lat_ns,
                "lat_nic + switches x lat_switch (NVLink: lat_nvlink)");
  for (int i = 0; i < p.nlinks; i++) {
    sim_net_link_stats_get(net, p.link[i], &st);
    CHECK((int)st.kind == kinds[i], "hop %d kind %d, expected %d", i, (int)st.kind, kinds[i]);
  }
}

static void test_route(void) {
  static const int nvl[] = {SIM_NET_NVL_OUT, SIM_NET_NVL_IN};
  static const int tor1[] = {SIM_NET_NIC_UP, SIM_NET_NIC_DOWN};
  static const int tor3[] = {SIM_NET_NIC_UP, SIM_NET_TOR_UP, SIM_NET_TOR_DOWN, SIM_NET_NIC_DOWN};
  static const int tor5[] = {SIM_NET_NIC_UP, SIM_NET_TOR_UP, SIM_NET_AGG_UP,
                             SIM_NET_AGG_DOWN, SIM_NET_TOR_DOWN, SIM_NET_NIC_DOWN};
  printf("== MegaScale Clos, 1536 nodes, pods by rail (64 nodes per ToR, 32 ToRs per pod)\n");
  sim_net *net = make_megascale(1536, SIM_NET_ECMP_HASH);
  sim_net_loc lo;
  sim_net_gpu_loc(net, G(1535, 7), &lo);
  /* node 1535: group 1535/64 = 23; rail 7 pod = 7 (24 groups fit a pod of 32) */
  check_eq("pod of node 1535 rail 7", 7, lo.pod, "pods by rail, 24 ToRs per rail <= 32");
  check_eq("tor of node 1535 rail 7", 7 * 32 + 23, lo.tor, "rail x 32 + node/64");
  expect_route(net, "same node", G(0, 0), G(0, 5), 2, 0, nvl);
  expect_route(net, "same rail, same ToR", G(0, 0), G(63, 0), 2, 1, tor1);
  expect_route(net, "same rail, other ToR (same pod)", G(0, 2), G(64, 2), 4, 3, tor3);
  expect_route(net, "other rail, other node (other pod)", G(0, 0), G(1, 1), 6, 5, tor5);
  sim_net_free(net);

  printf("== same Clos, pods by nodes (a pod = 4 ToR sets = 256 nodes, all rails)\n");
  sim_net_cfg cfg;
  sim_net_cfg_megascale(&cfg, 1536);
  cfg.pod_layout = SIM_NET_POD_BY_NODES;
  net = make(&cfg);
  expect_route(net, "other rail, same ToR set", G(0, 0), G(1, 1), 4, 3, tor3);
  expect_route(net, "same rail, other pod", G(0, 0), G(256, 0), 6, 5, tor5);
  sim_net_free(net);

  printf("== fat-tree, 2 tiers, radix 64, 1:1 (32 NICs = 4 nodes per ToR)\n");
  cfg.fabric = SIM_NET_FATTREE, cfg.tiers = 2, cfg.tor_oversub = 1, cfg.nodes = 256;
  net = make(&cfg);
  expect_route(net, "other rail, same ToR", G(0, 0), G(3, 5), 2, 1, tor1);
  expect_route(net, "other ToR (via spine)", G(0, 0), G(4, 0), 4, 3, tor3);
  sim_net_free(net);
  printf("== fat-tree, 3 tiers, radix 16, 3:1 at the ToR (12 down, 4 up; 8 ToRs per pod)\n");
  cfg.tiers = 3, cfg.tor_oversub = 3, cfg.switch_ports = 16, cfg.nodes = 100;
  net = make(&cfg);
  /* 12 NICs per ToR, 8 ToRs per pod: a pod has 96 NICs = 12 nodes */
  expect_route(net, "other ToR, same pod", G(0, 0), G(11, 0), 4, 3, tor3);
  expect_route(net, "other pod", G(0, 0), G(12, 0), 6, 5, tor5);
  sim_net_free(net);
}

/* ---- ring ------------------------------------------------------------------ */

/* Ring all-reduce of S bytes over the GPUs in g[0..n): 2(n-1) steps of S/n.
 * Expected, idle network: 2(n-1) x (alpha + S/n / B), each step rounded up
 * to an integer ns, so got - formula is in [0, 2(n-1)) ns. */
static void expect_ring(sim_net *net, const char *what, const int *g, int n, uint64_t S,
                        double B_Bpns, uint64_t alpha) {
  uint64_t t0 = sim_net_now(net), t_end;
  int steps = 2 * (n - 1);
  CHECK(sim_net_ring_run(net, g, n, S / n, steps, 7, t0, &t_end) == 0, "ring_run");
  double formula = steps * (alpha + (double)(S / n) / B_Bpns);
  uint64_t exact = (uint64_t)steps * (alpha + (uint64_t)ceil((double)(S / n) / B_Bpns));
  printf("%s: n = %d, S = %" PRIu64 " bytes\n", what, n, S);
  check_near("time (ns) vs 2(n-1)(alpha + S/n/B)", formula, (double)(t_end - t0), steps, 0,
              "alpha-beta formula, tolerance 2(n-1) ns of rounding");
  check_eq("time (ns) vs 2(n-1)(alpha + ceil(S/n/B))", exact, t_end - t0,
                "same, per-step ceil");
}

static void test_ring(void) {
  sim_net *net = make_megascale(1024, SIM_NET_ECMP_HASH);
  int g[192];
  /* 8 nodes under one ToR, rail 0: alpha = 2000 + 500 */
  for (int i = 0; i < 8; i++) g[i] = G(i, 0);
  expect_ring(net, "ring, 8 nodes, one ToR", g, 8, 8u << 20, NIC_BPNS, LAT_NIC + LAT_SW);
  /* 16 nodes on 16 ToRs (nodes 64 i), rail 3: every hop crosses ToR-agg-ToR,
   * alpha = 2000 + 3 x 500; one flow per ToR, so no ECMP collision */
  for (int i = 0; i < 16; i++) g[i] = G(64 * i, 3);
  expect_ring(net, "ring, 16 nodes, 16 ToRs", g, 16, 16u << 20, NIC_BPNS, LAT_NIC + 3 * LAT_SW);
  /* MegaScale's DP ring: 192 nodes on one rail = 3 ToRs. A step lasts as
   * long as its slowest flow: the 3 ToR-crossing ones, alpha = 3500 */
  for (int i = 0; i < 192; i++) g[i] = G(i, 5);
  expect_ring(net, "DP ring, 192 nodes, 3 ToRs", g, 192, 192u << 20, NIC_BPNS, LAT_NIC + 3 * LAT_SW);
  /* NVLink ring in one node: 300 B/ns, alpha = lat_nvlink */
  for (int i = 0; i < 8; i++) g[i] = G(9, i);
  expect_ring(net, "ring, 8 GPUs of one node (NVLink)", g, 8, 24000000, 300.0, LAT_NVL);
  sim_net_free(net);
}

/* ---- ecmp ------------------------------------------------------------------ */

static int32_t tor_up_of(sim_net *net, int src, int dst, uint64_t tag) {
  sim_net_path p;
  sim_net_route(net, src, dst, tag, &p);
  CHECK(p.nlinks >= 4, "expected a path through the ToR uplinks");
  return p.link[1];
}

/* Tags so that flows src[i] -> dst[i] all hash to the same ToR uplink. */
static void colliding_tags(sim_net *net, const int *src, const int *dst, int n, uint64_t *tag) {
  tag[0] = 0;
  int32_t want = tor_up_of(net, src[0], dst[0], 0);
  for (int i = 1; i < n; i++) {
    tag[i] = 0;
    while (tor_up_of(net, src[i], dst[i], tag[i]) != want) tag[i]++;
  }
}

/* Start n flows of 1e6 bytes at the current time and return the last t_done. */
static uint64_t run_flows(sim_net *net, const int *src, const int *dst, const uint64_t *tag, int n,
                          double *rate0) {
  uint64_t t[64], t0 = sim_net_now(net), last = 0;
  int32_t id[8];
  for (int i = 0; i < n; i++) id[i] = start(net, src[i], dst[i], 1000000, tag[i], t0);
  *rate0 = rate_of(net, id[0]);
  run_all(net, t, 64);
  for (int i = 0; i < n; i++) last = t[id[i]] > last ? t[id[i]] : last;
  return last - t0;
}

static void ecmp_case(sim_net_cfg *cfg, const char *what, int n, const int *src, const int *dst,
                      double want_hash_Bps, double want_ideal_Bps, uint64_t alpha) {
  uint64_t tag[8];
  double r;
  printf("%s\n", what);
  cfg->ecmp = SIM_NET_ECMP_HASH;
  sim_net *net = make(cfg);
  colliding_tags(net, src, dst, n, tag);
  char name[96];
  sim_net_link_name(net, tor_up_of(net, src[0], dst[0], tag[0]), name, sizeof name);
  printf("  hashing: all %d flows forced onto [%s]\n", n, name);
  uint64_t dt = run_flows(net, src, dst, tag, n, &r);
  check_near("  hashed: rate per flow (B/s)", want_hash_Bps, r, 0, 1e-12, "uplink / flows, or NIC if less");
  check_eq("  hashed: time (ns)", (uint64_t)ceil(1e6 / (want_hash_Bps / 1e9) - 1e-6) + alpha, dt,
                "1e6 / rate + alpha");
  sim_net_free(net);
  cfg->ecmp = SIM_NET_ECMP_IDEAL;
  net = make(cfg);
  dt = run_flows(net, src, dst, tag, n, &r);
  check_near("  ideal: rate per flow (B/s)", want_ideal_Bps, r, 0, 1e-12, "spread over all uplinks: NIC-bound");
  check_eq("  ideal: time (ns)", (uint64_t)ceil(1e6 / (want_ideal_Bps / 1e9) - 1e-6) + alpha, dt,
                "1e6 / rate + alpha");
  sim_net_free(net);
}

static void test_ecmp(void) {
  sim_net_cfg cfg;
  const uint64_t alpha = LAT_NIC + 3 * LAT_SW; /* NIC, ToR, agg, ToR */
  /* Generic fat-tree whose uplinks run at NIC speed (200G): 2 tiers, radix 16,
   * 1:1 -> 8 NICs = 1 node per ToR. Two flows from node 0 (GPUs 0, 1: two
   * NICs) to node 1 on one hashed uplink share 25 B/ns: 12.5 each. */
  sim_net_cfg_megascale(&cfg, 16);
  cfg.fabric = SIM_NET_FATTREE, cfg.tiers = 2, cfg.switch_ports = 16, cfg.switch_port_gbps = 200;
  int s2[] = {G(0, 0), G(0, 1)}, d2[] = {G(1, 0), G(1, 1)};
  ecmp_case(&cfg, "fat-tree, 200G uplinks: 2 flows collide on one uplink", 2, s2, d2, 12.5e9, 25e9, alpha);
  /* MegaScale: uplinks are 400G = 2 NICs, so 2 colliding flows still run at
   * 25 B/ns (the paper's reason for splitting ports); 3 share 50/3 B/ns. */
  sim_net_cfg_megascale(&cfg, 128);
  int s3[] = {G(0, 0), G(1, 0), G(2, 0)}, d3[] = {G(64, 0), G(65, 0), G(66, 0)};
  ecmp_case(&cfg, "MegaScale Clos, 400G uplinks: 2 flows collide on one uplink", 2, s3, d3, 25e9, 25e9, alpha);
  ecmp_case(&cfg, "MegaScale Clos, 400G uplinks: 3 flows collide on one uplink", 3, s3, d3, 50e9 / 3, 25e9, alpha);
}

/* ---- determinism ------------------------------------------------------------ */

enum { DET_FLOWS = 3000 };

/* A random workload (random pairs, sizes, start times) played by an event
 * loop; fills t_done per flow in start order and returns the final time. */
static uint64_t det_run(sim_net_ecmp ecmp, uint64_t *t_done, uint64_t seed) {
  sim_net *net = make_megascale(128, ecmp);
  int32_t ids[DET_FLOWS];
  uint64_t t_next = 0, rng = seed;
  int started = 0;
  for (int i = 0; i < DET_FLOWS; i++) t_done[i] = UINT64_MAX;
  sim_net_done d;
  for (;;) {
    uint64_t te;
    int have = sim_net_next_event(net, &te);
    if (!have && started == DET_FLOWS) break;
    if (started < DET_FLOWS && (!have || t_next <= te)) {
      int src = (int)(check_rand(&rng) % 1024), dst = (int)(check_rand(&rng) % 1024);
      ids[started++] = start(net, src, dst, 1 + check_rand(&rng) % 4000000, check_rand(&rng) % 4, t_next);
      t_next += check_rand(&rng) % 3000;
      continue;
    }
    sim_net_advance(net, te);
    while (sim_net_pop_done(net, &d)) {
      /* ids are reused after pop: map back to start index */
      for (int i = started - 1; i >= 0; i--)
        if (ids[i] == d.flow && t_done[i] == UINT64_MAX) { t_done[i] = d.t_done_ns; ids[i] = -1; break; }
    }
  }
  uint64_t now = sim_net_now(net);
  sim_net_free(net);
  return now;
}

static uint64_t fnv(const uint64_t *v, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) h = (h ^ v[i]) * 1099511628211ull;
  return h;
}

static void test_determinism(void) {
  static uint64_t a[DET_FLOWS], b[DET_FLOWS];
  for (int e = 0; e < 2; e++) {
    sim_net_ecmp ecmp = e ? SIM_NET_ECMP_IDEAL : SIM_NET_ECMP_HASH;
    uint64_t ta = det_run(ecmp, a, 11), tb = det_run(ecmp, b, 11);
    int diff = 0, zero = 0;
    for (int i = 0; i < DET_FLOWS; i++) diff += a[i] != b[i], zero += a[i] == UINT64_MAX;
    printf("%s: %d random flows on a 128-node Clos, played twice (hash %016" PRIx64 ")\n",
           e ? "ideal ECMP" : "hashed ECMP", DET_FLOWS, fnv(a, DET_FLOWS));
    check_eq("flows never completed", 0, zero, "all flows finish");
    check_eq("completion times that differ", 0, diff, "same calls, same times");
    check_eq("final time run 2", ta, tb, "same calls, same times");
  }
}

/* ---- maxmin ---------------------------------------------------------------- */

/* Reference max-min by plain progressive filling over all active flows at
 * once (no components, no heap): repeat { find the link with the smallest
 * rem/unfixed; fix its unfixed flows at that share }. O(rounds x (flows x
 * hops + links)). `loc` maps a link id to a dense index (-1 = unused). */
static void ref_maxmin(int nf, const sim_net_path *p, const double *cap_of, int *loc, int nl_max,
                       double *rate) {
  double *rem = calloc((size_t)nl_max, sizeof *rem);
  int *cnt = calloc((size_t)nl_max, sizeof *cnt), nl = 0, left = nf;
  int32_t *ids = calloc((size_t)nl_max, sizeof *ids);
  char *fixed = calloc((size_t)nf, 1);
  for (int f = 0; f < nf; f++)
    for (int h = 0; h < p[f].nlinks; h++)
      if (loc[p[f].link[h]] < 0) ids[nl] = p[f].link[h], rem[nl] = cap_of[p[f].link[h]], loc[p[f].link[h]] = nl++;
  while (left > 0) {
    for (int l = 0; l < nl; l++) cnt[l] = 0;
    for (int f = 0; f < nf; f++)
      for (int h = 0; h < p[f].nlinks && !fixed[f]; h++) cnt[loc[p[f].link[h]]]++;
    int best = -1;
    for (int l = 0; l < nl; l++)
      if (cnt[l] && (best < 0 || rem[l] / cnt[l] < rem[best] / cnt[best])) best = l;
    double s = rem[best] / cnt[best];
    for (int f = 0; f < nf; f++) {
      int on = 0;
      for (int h = 0; h < p[f].nlinks; h++) on |= loc[p[f].link[h]] == best;
      if (fixed[f] || !on) continue;
      fixed[f] = 1, rate[f] = s, left--;
      for (int h = 0; h < p[f].nlinks; h++) rem[loc[p[f].link[h]]] -= s;
    }
  }
  for (int l = 0; l < nl; l++) loc[ids[l]] = -1;
  free(rem), free(cnt), free(ids), free(fixed);
}

/* Rates of the live flows in ids[] against the reference; returns the
 * largest relative difference. */
static double compare_rates(sim_net *net, const int32_t *ids, int n, const double *cap_of, int *loc) {
  sim_net_path *p = malloc((size_t)(n + 1) * sizeof *p);
  double *got = malloc((size_t)(n + 1) * sizeof *got), *want = malloc((size_t)(n + 1) * sizeof *want);
  int nf = 0;
  for (int i = 0; i < n; i++) {
    sim_net_flow_info fi;
    CHECK(sim_net_flow_get(net, ids[i], &fi) == 0, "flow %d not live", ids[i]);
    if (fi.state != SIM_NET_FLOW_ACTIVE || fi.path.nlinks == 0 || fi.bytes == 0) continue;
    p[nf] = fi.path, got[nf++] = fi.rate_Bps / 1e9;
  }
  ref_maxmin(nf, p, cap_of, loc, sim_net_link_count(net), want);
  double worst = 0;
  for (int f = 0; f < nf; f++) {
    double d = fabs(got[f] - want[f]) / want[f];
    worst = d > worst ? d : worst;
  }
  free(p), free(got), free(want);
  return worst;
}

/* Random arrivals; after every network event the incremental rates (only
 * the touched component is recomputed) must equal a from-scratch max-min. */
static void maxmin_case(const char *what, const sim_net_cfg *cfg, int flows, uint64_t seed) {
  sim_net *net = make(cfg);
  int nl = sim_net_link_count(net), gpus = sim_net_gpus(net), nlive = 0, started = 0, checks = 0, most = 0;
  double *cap_of = malloc((size_t)nl * sizeof *cap_of), worst = 0;
  int *loc = malloc((size_t)nl * sizeof *loc);
  int32_t *live = malloc((size_t)flows * sizeof *live);
  for (int l = 0; l < nl; l++) {
    sim_net_link_stats st;
    sim_net_link_stats_get(net, l, &st);
    cap_of[l] = st.cap_Bps / 1e9, loc[l] = -1;
  }
  uint64_t rng = seed, t_next = 0, te;
  sim_net_done d;
  for (;;) {
    int have = sim_net_next_event(net, &te);
    if (!have && started == flows) break;
    if (started < flows && (!have || t_next <= te)) {
      int src = (int)(check_rand(&rng) % (uint64_t)gpus), dst = (int)(check_rand(&rng) % (uint64_t)gpus);
      live[nlive++] = start(net, src, dst, 1 + check_rand(&rng) % 3000000, check_rand(&rng) % 3, t_next);
      started++;
      t_next += check_rand(&rng) % 800;
    } else {
      sim_net_advance(net, te);
      while (sim_net_pop_done(net, &d))
        for (int i = 0; i < nlive; i++)
          if (live[i] == d.flow) { live[i] = live[--nlive]; break; }
    }
    most = nlive > most ? nlive : most;
    double w = compare_rates(net, live, nlive, cap_of, loc);
    worst = w > worst ? w : worst, checks++;
  }
  printf("%s: %d flows (up to %d at once), rates compared with the reference at %d points\n", what,
         flows, most, checks);
  check_near("largest relative rate difference", 0, worst, 1e-9, 0, "from-scratch progressive filling");
  free(cap_of), free(loc), free(live);
  sim_net_free(net);
}

static void test_maxmin(void) {
  sim_net_cfg cfg;
  sim_net_cfg_megascale(&cfg, 128);
  cfg.ecmp_seed = 1;
  maxmin_case("MegaScale Clos 128 nodes, hashed ECMP", &cfg, 600, 21);
  cfg.ecmp = SIM_NET_ECMP_IDEAL;
  maxmin_case("MegaScale Clos 128 nodes, ideal ECMP", &cfg, 600, 22);
  /* 3-tier fat-tree, radix 8, 3:1 at the ToR (6 NICs down, 2 up): NICs of
   * one node straddle ToRs, uplinks are oversubscribed */
  sim_net_cfg_megascale(&cfg, 16);
  cfg.fabric = SIM_NET_FATTREE, cfg.tiers = 3, cfg.switch_ports = 8, cfg.tor_oversub = 3;
  maxmin_case("fat-tree 3 tiers radix 8, 3:1", &cfg, 600, 23);
}

/* ---- stats ------------------------------------------------------------------ */

/* After random traffic, each link must have carried the bytes of the flows
 * routed over it (up to 1 ns x rate of rounding per flow), and a link that
 * only one flow ever crossed was busy exactly while that flow was sending:
 * from its start to its drain (= t_done - path latency). */
static void test_stats(void) {
  enum { N = 2000 };
  sim_net *net = make_megascale(128, SIM_NET_ECMP_HASH);
  int nl = sim_net_link_count(net);
  double *want = calloc((size_t)nl, sizeof *want);
  int *nflows = calloc((size_t)nl, sizeof *nflows), *who = calloc((size_t)nl, sizeof *who);
  int32_t ids[N];
  uint64_t rng = 3, t[4 * N], t_start[N], lat[N];
  for (int i = 0; i < N; i++) {
    int src = (int)(check_rand(&rng) % 1024), dst = (int)(check_rand(&rng) % 1024);
    uint64_t bytes = 1 + check_rand(&rng) % 2000000, tag = check_rand(&rng) % 8;
    sim_net_path p;
    sim_net_route(net, src, dst, tag, &p);
    for (int h = 0; h < p.nlinks && src != dst; h++)
      want[p.link[h]] += (double)bytes, nflows[p.link[h]]++, who[p.link[h]] = i;
    t_start[i] = (uint64_t)i * 100, lat[i] = p.lat_ns;
    ids[i] = start(net, src, dst, bytes, tag, t_start[i]);
  }
  run_all(net, t, 4 * N);
  int bad = 0, used = 0, single = 0, bad_busy = 0;
  double worst = 0, total = 0;
  uint64_t now = sim_net_now(net);
  for (int l = 0; l < nl; l++) {
    sim_net_link_stats st;
    sim_net_link_stats_get(net, l, &st);
    double err = fabs(st.bytes - want[l]);
    bad += err > 1 + nflows[l] * st.cap_Bps * 1e-9 || st.full_ns > st.busy_ns || st.busy_ns > now ||
           (nflows[l] ? st.max_flows < 1 || st.max_flows > nflows[l] : st.max_flows != 0);
    worst = err > worst ? err : worst;
    used += nflows[l] > 0, total += st.bytes;
    if (nflows[l] == 1) {
      int i = who[l];
      single++;
      bad_busy += st.busy_ns != t[ids[i]] - lat[i] - t_start[i] || st.max_flows != 1;
    }
  }
  printf("stats: %d flows, %d links used of %d, %.4g bytes carried in all\n", N, used, nl, total);
  printf("  largest |bytes carried - bytes routed| on a link: %.3g bytes\n", worst);
  check_eq("links with wrong counters", 0, bad,
                "bytes = sum of flows routed; full <= busy <= now; 1 <= most flows at once <= flows routed");
  printf("  %d links were crossed by exactly one flow\n", single);
  check_eq("of those, busy_ns != the flow's send time or max_flows != 1", 0, bad_busy,
                "busy = t_done - lat - t_start");
  free(want), free(nflows), free(who);
  sim_net_free(net);
}

/* ---- config ------------------------------------------------------------------ */

static void expect_bad(const sim_net_cfg *cfg, const char *field) {
  char err[256] = "";
  sim_net *net = sim_net_new(cfg, err, sizeof err);
  printf("  bad %-16s -> \"%s\"\n", field, err);
  CHECK(!net, "sim_net_new accepted a bad %s", field);
  CHECK(strstr(err, field), "message does not name %s", field);
  CHECK(sim_net_cfg_check(cfg, NULL, 0) == -1, "cfg_check accepted a bad %s", field);
}

static void test_config(void) {
  sim_net_cfg c;
  char err[256];
  printf("rejected configs, each with its message:\n");
  sim_net_cfg_megascale(&c, 0), expect_bad(&c, "nodes");
  sim_net_cfg_megascale(&c, 20000), expect_bad(&c, "nodes");
  sim_net_cfg_megascale(&c, 16), c.nic_gbps = 0, expect_bad(&c, "nic_gbps");
  sim_net_cfg_megascale(&c, 16), c.nvlink_GBps = -300, expect_bad(&c, "nvlink_GBps");
  sim_net_cfg_megascale(&c, 16), c.switch_port_gbps = NAN, expect_bad(&c, "switch_port_gbps");
  sim_net_cfg_megascale(&c, 16), c.nics_per_node = 3, expect_bad(&c, "nics_per_node");
  sim_net_cfg_megascale(&c, 16), c.gpus_per_node = 0, expect_bad(&c, "gpus_per_node");
  sim_net_cfg_megascale(&c, 16), c.switch_ports = 63, expect_bad(&c, "switch_ports");
  sim_net_cfg_megascale(&c, 16), c.tor_split = 4, expect_bad(&c, "tor_split");
  sim_net_cfg_megascale(&c, 16), c.fabric = 0, expect_bad(&c, "fabric");
  sim_net_cfg_megascale(&c, 16), c.fabric = SIM_NET_FATTREE, c.tiers = 4, expect_bad(&c, "tiers");
  sim_net_cfg_megascale(&c, 16), c.fabric = SIM_NET_FATTREE, c.tor_oversub = 0.5, expect_bad(&c, "tor_oversub");
  /* 2-tier radix 64, 1:1: 64 ToRs x 32 NICs = 2048 NICs = 256 nodes */
  sim_net_cfg_megascale(&c, 257), c.fabric = SIM_NET_FATTREE, c.tiers = 2, expect_bad(&c, "nodes");
  printf("accepted limits:\n");
  c.nodes = 256;
  check_eq("2-tier fat-tree radix 64, 256 nodes", 0, sim_net_cfg_check(&c, err, sizeof err), "64 ToRs x 32 NICs");
  /* CLOS3 by rail: 64 pods / 8 rails = 8 pods per rail x 32 ToRs x 64 nodes */
  sim_net_cfg_megascale(&c, 16384);
  check_eq("MegaScale Clos, 16384 nodes", 0, sim_net_cfg_check(&c, err, sizeof err), "8 x 32 x 64");
  sim_net_cfg_megascale(&c, 16385);
  check_eq("MegaScale Clos, 16385 nodes rejected", 1, sim_net_cfg_check(&c, err, sizeof err) == -1,
                "one node too many");
  sim_net_cfg_megascale(&c, 1536);
  sim_net *net = make(&c);
  printf("  MegaScale 1536 nodes (12,288 GPUs): %d GPUs, %d links\n", sim_net_gpus(net), sim_net_link_count(net));
  CHECK(sim_net_flow_start(net, -1, 0, 1, 0, 0) == SIM_NET_EINVAL, "bad src accepted");
  CHECK(sim_net_flow_start(net, 0, 12288, 1, 0, 0) == SIM_NET_EINVAL, "bad dst accepted");
  printf("  flow_start with bad GPU ids -> SIM_NET_EINVAL\n");
  sim_net_free(net);
}

int main(int argc, char **argv) {
  static const struct { const char *name; void (*fn)(void); } cases[] = {
      {"share", test_share}, {"route", test_route}, {"ring", test_ring}, {"ecmp", test_ecmp},
      {"determinism", test_determinism}, {"maxmin", test_maxmin}, {"stats", test_stats}, {"config", test_config}};
  const char *which = argc > 1 ? argv[1] : "all";
  int ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(which, "all") || !strcmp(which, cases[i].name))
      printf("== %s\n", cases[i].name), cases[i].fn(), ran++;
  CHECK(ran, "unknown case %s", which);
  return check_done("sim_net");
}

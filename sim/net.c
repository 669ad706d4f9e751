/* sim/net.c: the fabric half of the network model (net.h): configuration,
 * topology, routing, construction, link statistics and ring collectives;
 * the flows and their max-min fair sharing are in net_flow.c, the shared
 * state in net_int.h. */
#include "sim/net_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ------------------------------------------------------ */

void sim_net_cfg_megascale(sim_net_cfg *c, int nodes) {
  memset(c, 0, sizeof *c);
  c->nodes = nodes;
  c->gpus_per_node = 8;
  c->nics_per_node = 8;
  c->nvlink_GBps = 300;      /* A100 SXM: 600 GB/s bidirectional */
  c->nic_gbps = 200;
  c->fabric = SIM_NET_CLOS3;
  c->switch_ports = 64;      /* Tomahawk 4: 64 x 400G */
  c->switch_port_gbps = 400;
  c->tor_split = 2;
  c->pod_layout = SIM_NET_POD_BY_RAIL;
  c->tiers = 3;
  c->tor_oversub = 1;
  c->ecmp = SIM_NET_ECMP_HASH;
  c->ecmp_seed = 0x5eed;
  c->lat_nvlink_ns = 1000;   /* assumed until calibrated */
  c->lat_nic_ns = 2000;      /* assumed: both NICs plus wire */
  c->lat_switch_ns = 500;    /* assumed: Tomahawk-class port to port */
}

static int fail(char *err, size_t len, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static int check_basic(const sim_net_cfg *c, char *err, size_t len) {
  if (c->nodes < 1) return fail(err, len, "net: nodes = %d; allowed: >= 1", c->nodes);
  if (c->gpus_per_node < 1)
    return fail(err, len, "net: gpus_per_node = %d; allowed: >= 1", c->gpus_per_node);
  if (c->nics_per_node < 1 || c->gpus_per_node % c->nics_per_node)
    return fail(err, len, "net: nics_per_node = %d; allowed: >= 1 and dividing gpus_per_node (%d)",
                c->nics_per_node, c->gpus_per_node);
  if (!(c->nvlink_GBps > 0) || isinf(c->nvlink_GBps))
    return fail(err, len, "net: nvlink_GBps = %g; allowed: finite > 0 (GB/s per direction)", c->nvlink_GBps);
  if (!(c->nic_gbps > 0) || isinf(c->nic_gbps))
    return fail(err, len, "net: nic_gbps = %g; allowed: finite > 0 (Gb/s)", c->nic_gbps);
  if (!(c->switch_port_gbps > 0) || isinf(c->switch_port_gbps))
    return fail(err, len, "net: switch_port_gbps = %g; allowed: finite > 0 (Gb/s)", c->switch_port_gbps);
  if (c->switch_ports < 4 || c->switch_ports % 2 || c->switch_ports > 4096)
    return fail(err, len, "net: switch_ports = %d; allowed: even, 4 to 4096", c->switch_ports);
  if (c->ecmp != SIM_NET_ECMP_HASH && c->ecmp != SIM_NET_ECMP_IDEAL)
    return fail(err, len, "net: ecmp = %d; allowed: SIM_NET_ECMP_HASH (0) or SIM_NET_ECMP_IDEAL (1)", (int)c->ecmp);
  return 0;
}

/* CLOS3: ToR = radix/2 ports down split tor_split ways, radix/2 up; agg =
 * radix/2 down (ToRs per pod), radix/2 up; spine = radix down (pods). */
static int plan_clos3(const sim_net_cfg *c, fabric *f, char *err, size_t len) {
  int half = c->switch_ports / 2, rails = c->nics_per_node;
  if (c->tor_split < 1 || c->tor_split * c->nic_gbps > c->switch_port_gbps * (1 + 1e-12))
    return fail(err, len, "net: tor_split = %d; allowed: >= 1 with tor_split x nic_gbps (%g) <= switch_port_gbps (%g)",
                c->tor_split, c->nic_gbps, c->switch_port_gbps);
  if (c->pod_layout != SIM_NET_POD_BY_RAIL && c->pod_layout != SIM_NET_POD_BY_NODES)
    return fail(err, len, "net: pod_layout = %d; allowed: SIM_NET_POD_BY_RAIL (0) or SIM_NET_POD_BY_NODES (1)",
                (int)c->pod_layout);
  f->nic_per_tor = half * c->tor_split;
  f->up = half;
  f->tors_per_pod = half;
  f->spine_up = half;
  f->max_pods = c->switch_ports;
  f->groups = ceil_div(c->nodes, f->nic_per_tor);
  f->pods_per_rail = ceil_div(f->groups, half);
  f->pods = c->pod_layout == SIM_NET_POD_BY_RAIL ? rails * f->pods_per_rail
                                                 : ceil_div(f->groups * rails, half);
  f->tor_up_Bpns = f->agg_up_Bpns = c->switch_port_gbps / 8;
  if (f->pods > f->max_pods) {
    long max_nodes = c->pod_layout == SIM_NET_POD_BY_RAIL
                         ? (long)(f->max_pods / rails) * half * f->nic_per_tor
                         : (long)(f->max_pods * half / rails) * f->nic_per_tor;
    return fail(err, len, "net: nodes = %d does not fit the CLOS3 fabric: needs %d pods, at most %d "
                "(switch_ports); allowed: nodes <= %ld", c->nodes, f->pods, f->max_pods, max_nodes);
  }
  return 0;
}

/* FATTREE: ToR = d down (NICs) and u up, d:u ~ tor_oversub; above the ToR
 * non-blocking: two tiers = u spines of radix ports; three tiers = pods of
 * radix/2 ToRs and u aggs, radix/2 spine uplinks per agg, radix pods. */
static int plan_fattree(const sim_net_cfg *c, fabric *f, char *err, size_t len) {
  int k = c->switch_ports;
  if (c->tiers != 2 && c->tiers != 3)
    return fail(err, len, "net: tiers = %d; allowed: 2 or 3", c->tiers);
  if (!(c->tor_oversub >= 1) || isinf(c->tor_oversub))
    return fail(err, len, "net: tor_oversub = %g; allowed: finite >= 1 (down:up)", c->tor_oversub);
  int d = (int)floor(k * c->tor_oversub / (1 + c->tor_oversub));
  if (d >= k) d = k - 1;
  f->nic_per_tor = d;
  f->up = k - d;
  f->tors_per_pod = c->tiers == 2 ? k : k / 2;
  f->spine_up = c->tiers == 2 ? 0 : k / 2;
  f->max_pods = c->tiers == 2 ? 1 : k;
  f->groups = 0;
  f->pods_per_rail = 0;
  int tors = ceil_div(c->nodes * c->nics_per_node, d);
  f->pods = ceil_div(tors, f->tors_per_pod);
  f->tor_up_Bpns = f->agg_up_Bpns = c->switch_port_gbps / 8;
  if (f->pods > f->max_pods)
    return fail(err, len, "net: nodes = %d does not fit the %d-tier FATTREE: needs %d ToRs of %d NICs, at most %d; "
                "allowed: nodes <= %ld", c->nodes, c->tiers, tors, d, f->max_pods * f->tors_per_pod,
                (long)f->max_pods * f->tors_per_pod * d / c->nics_per_node);
  return 0;
}

static int plan(const sim_net_cfg *c, fabric *f, char *err, size_t len) {
  if (!c) return fail(err, len, "net: config is NULL");
  if (check_basic(c, err, len)) return -1;
  memset(f, 0, sizeof *f);
  f->nic_Bpns = c->nic_gbps / 8;
  f->nvl_Bpns = c->nvlink_GBps;
  if (c->fabric == SIM_NET_CLOS3) return plan_clos3(c, f, err, len);
  if (c->fabric == SIM_NET_FATTREE) return plan_fattree(c, f, err, len);
  return fail(err, len, "net: fabric = %d; allowed: SIM_NET_CLOS3 (1) or SIM_NET_FATTREE (2)", (int)c->fabric);
}

int sim_net_cfg_check(const sim_net_cfg *cfg, char *err, size_t err_len) {
  fabric f;
  return plan(cfg, &f, err, err_len);
}

/* ---- topology ----------------------------------------------------------- */

static int32_t lk_nvl(const sim_net *n, int gpu, int dir) { return 2 * gpu + dir; }
static int32_t lk_nic(const sim_net *n, int nic, int dir) { return n->base_nic + 2 * nic + dir; }
static int32_t lk_tor(const sim_net *n, int tor, int j, int dir) {
  return n->base_tor + 2 * (tor * n->ul + j) + dir;
}
static int32_t lk_agg(const sim_net *n, int pod, int j, int k, int dir) {
  return n->base_agg + 2 * ((pod * n->ul + j) * n->sk + k) + dir;
}

static int tor_of(const sim_net *n, int node, int rail) {
  const fabric *f = &n->fab;
  if (n->cfg.fabric == SIM_NET_FATTREE) return (node * n->cfg.nics_per_node + rail) / f->nic_per_tor;
  int grp = node / f->nic_per_tor;
  if (n->cfg.pod_layout == SIM_NET_POD_BY_RAIL)
    return rail * f->pods_per_rail * f->tors_per_pod + grp;
  return grp * n->cfg.nics_per_node + rail;
}

int sim_net_gpus(const sim_net *net) { return net->gpus; }
int sim_net_link_count(const sim_net *net) { return net->nlinks; }
uint64_t sim_net_now(const sim_net *net) { return net->now_ns; }

int sim_net_gpu_loc(const sim_net *n, int g, sim_net_loc *o) {
  if (g < 0 || g >= n->gpus) return -1;
  int gpn = n->cfg.gpus_per_node;
  o->node = g / gpn;
  o->local = g % gpn;
  o->rail = o->local / (gpn / n->cfg.nics_per_node);
  o->nic = o->node * n->cfg.nics_per_node + o->rail;
  o->tor = tor_of(n, o->node, o->rail);
  o->pod = o->tor / n->fab.tors_per_pod;
  return 0;
}

/* splitmix64 finaliser: a fixed, well-mixed 64-bit hash. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t ecmp_hash(const sim_net *n, int src, int dst, uint64_t tag) {
  uint64_t h = mix64(n->cfg.ecmp_seed);
  h = mix64(h ^ (uint64_t)(uint32_t)src);
  h = mix64(h ^ ((uint64_t)(uint32_t)dst << 32));
  return mix64(h ^ tag);
}

static void path_add(sim_net_path *p, int32_t l) { p->link[p->nlinks++] = l; }

/* Inter-node part: nic_up [tor_up [agg_up agg_down] tor_down] nic_down. */
static void route_fabric(const sim_net *n, const sim_net_loc *a, const sim_net_loc *b,
                         uint64_t h, sim_net_path *p) {
  int ideal = n->cfg.ecmp == SIM_NET_ECMP_IDEAL;
  path_add(p, lk_nic(n, a->nic, UP));
  p->nswitches = 1;
  if (a->tor != b->tor) {
    int j = ideal ? 0 : (int)(h % (uint64_t)n->fab.up);
    path_add(p, lk_tor(n, a->tor, j, UP));
    if (a->pod != b->pod) {
      int k = ideal ? 0 : (int)((h >> 32) % (uint64_t)n->fab.spine_up);
      path_add(p, lk_agg(n, a->pod, j, k, UP));
      path_add(p, lk_agg(n, b->pod, j, k, DOWN));
      p->nswitches += 2;
    }
    path_add(p, lk_tor(n, b->tor, j, DOWN));
    p->nswitches += 2;
  }
  path_add(p, lk_nic(n, b->nic, DOWN));
  p->lat_ns = n->cfg.lat_nic_ns + (uint64_t)p->nswitches * n->cfg.lat_switch_ns;
}

int sim_net_route(const sim_net *n, int src, int dst, uint64_t tag, sim_net_path *p) {
  sim_net_loc a, b;
  if (sim_net_gpu_loc(n, src, &a) || sim_net_gpu_loc(n, dst, &b)) return -1;
  p->nlinks = 0;
  p->nswitches = 0;
  p->lat_ns = 0;
  if (src == dst) return 0;
  if (a.node == b.node) {
    path_add(p, lk_nvl(n, src, UP));
    path_add(p, lk_nvl(n, dst, DOWN));
    p->lat_ns = n->cfg.lat_nvlink_ns;
    return 0;
  }
  uint64_t h = n->cfg.ecmp == SIM_NET_ECMP_IDEAL ? 0 : ecmp_hash(n, src, dst, tag);
  route_fabric(n, &a, &b, h, p);
  return 0;
}

/* ---- construction ------------------------------------------------------- */

static void layout_links(sim_net *n) {
  const fabric *f = &n->fab;
  int ideal = n->cfg.ecmp == SIM_NET_ECMP_IDEAL;
  n->ul = ideal ? 1 : f->up;
  n->sk = ideal || !f->spine_up ? 1 : f->spine_up;
  int tors = f->pods * f->tors_per_pod;
  int agg_slots = f->spine_up ? f->pods * n->ul * n->sk : 0;
  n->base_nic = 2 * n->gpus;
  n->base_tor = n->base_nic + 2 * n->nics;
  n->base_agg = n->base_tor + 2 * tors * n->ul;
  n->nlinks = n->base_agg + 2 * agg_slots;
}

static double link_cap(const sim_net *n, int32_t l) {
  const fabric *f = &n->fab;
  int ideal = n->cfg.ecmp == SIM_NET_ECMP_IDEAL;
  if (l < n->base_nic) return f->nvl_Bpns;
  if (l < n->base_tor) return f->nic_Bpns;
  if (l < n->base_agg) return f->tor_up_Bpns * (ideal ? f->up : 1);
  return f->agg_up_Bpns * (ideal ? (double)f->up * f->spine_up : 1);
}

static int alloc_arrays(sim_net *n) {
  n->links = calloc((size_t)n->nlinks, sizeof *n->links);
  n->dirty = malloc((size_t)n->nlinks * sizeof *n->dirty);
  n->comp_l = malloc((size_t)n->nlinks * sizeof *n->comp_l);
  if (!n->links || !n->dirty || !n->comp_l) return -1;
  if (sim_heap_init(&n->ev, 1024) || sim_heap_init(&n->fill, (size_t)n->nlinks)) return -1;
  for (int32_t l = 0; l < n->nlinks; l++) {
    n->links[l].cap = link_cap(n, l);
    sim_heap_node_init(&n->links[l].fill);
  }
  return 0;
}

sim_net *sim_net_new(const sim_net_cfg *cfg, char *err, size_t err_len) {
  fabric f;
  if (plan(cfg, &f, err, err_len)) return NULL;
  sim_net *n = calloc(1, sizeof *n);
  if (!n) return fail(err, err_len, "net: out of memory"), NULL;
  n->cfg = *cfg;
  n->fab = f;
  n->gpus = cfg->nodes * cfg->gpus_per_node;
  n->nics = cfg->nodes * cfg->nics_per_node;
  n->free_head = -1;
  layout_links(n);
  if (alloc_arrays(n)) {
    sim_net_free(n);
    return fail(err, err_len, "net: out of memory for %d links", (int)n->nlinks), NULL;
  }
  return n;
}

void sim_net_free(sim_net *n) {
  if (!n) return;
  if (n->links)
    for (int32_t l = 0; l < n->nlinks; l++) free(n->links[l].flows);
  for (int32_t c = 0; c < n->nchunk; c++) free(n->chunk[c]);
  free(n->chunk);
  free(n->links);
  free(n->dirty);
  free(n->comp_l);
  free(n->comp_f);
  free(n->dirty_f);
  free(n->done);
  sim_heap_free(&n->ev);
  sim_heap_free(&n->fill);
  free(n);
}

/* ---- utilisation ---------------------------------------------------------- */

/* Kind, owner and ports of link l (l in range). */
static void link_decode(const sim_net *n, int32_t l, sim_net_link_stats *o) {
  int ideal = n->cfg.ecmp == SIM_NET_ECMP_IDEAL, dir = l & 1;
  o->port = o->port2 = -1;
  if (l < n->base_nic) {
    o->kind = dir ? SIM_NET_NVL_IN : SIM_NET_NVL_OUT;
    o->owner = l / 2;
  } else if (l < n->base_tor) {
    o->kind = dir ? SIM_NET_NIC_DOWN : SIM_NET_NIC_UP;
    o->owner = (l - n->base_nic) / 2;
  } else if (l < n->base_agg) {
    int slot = (l - n->base_tor) / 2;
    o->kind = dir ? SIM_NET_TOR_DOWN : SIM_NET_TOR_UP;
    o->owner = slot / n->ul;
    if (!ideal) o->port = slot % n->ul;
  } else {
    int slot = (l - n->base_agg) / 2;
    o->kind = dir ? SIM_NET_AGG_DOWN : SIM_NET_AGG_UP;
    o->owner = slot / (n->ul * n->sk);
    if (!ideal) o->port = slot / n->sk % n->ul, o->port2 = slot % n->sk;
  }
}

int sim_net_link_stats_get(sim_net *n, int l, sim_net_link_stats *o) {
  if (l < 0 || l >= n->nlinks) return -1;
  const link *k = net_link_now(n, l);
  link_decode(n, l, o);
  o->cap_Bps = k->cap * 1e9;
  o->bytes = k->bytes;
  o->busy_ns = k->busy_ns;
  o->full_ns = k->full_ns;
  o->flows = k->nflows;
  o->max_flows = k->max_flows;
  return 0;
}

int sim_net_link_name(const sim_net *n, int l, char *buf, size_t len) {
  static const char *kinds[] = {"nvl_out gpu", "nvl_in gpu", "nic_up nic", "nic_down nic",
                                "tor_up tor", "tor_down tor", "agg_up pod", "agg_down pod"};
  sim_net_link_stats o;
  if (l < 0 || l >= n->nlinks) return snprintf(buf, len, "link %d (out of range)", l);
  link_decode(n, l, &o);
  if (o.port2 >= 0) return snprintf(buf, len, "%s=%d j=%d k=%d", kinds[o.kind], o.owner, o.port, o.port2);
  if (o.port >= 0) return snprintf(buf, len, "%s=%d j=%d", kinds[o.kind], o.owner, o.port);
  if (o.kind >= SIM_NET_TOR_UP) return snprintf(buf, len, "%s=%d (all uplinks)", kinds[o.kind], o.owner);
  return snprintf(buf, len, "%s=%d", kinds[o.kind], o.owner);
}

/* ---- ring collective ------------------------------------------------------ */

/* Run the network until `count` flows have completed; *t_ns = last completion. */
static void wait_done(sim_net *n, int count, uint64_t *t_ns) {
  sim_net_done d;
  uint64_t te;
  while (count > 0 && sim_net_next_event(n, &te)) {
    sim_net_advance(n, te);
    while (sim_net_pop_done(n, &d)) count--, *t_ns = d.t_done_ns;
  }
}

int sim_net_ring_run(sim_net *n, const int *gpus, int count, uint64_t bytes_per_step,
                     int steps, uint64_t tag, uint64_t t0_ns, uint64_t *t_end_ns) {
  if (!gpus || count < 1 || steps < 0 || t0_ns < n->now_ns) return SIM_NET_EINVAL;
  if (n->nlive) return SIM_NET_EBUSY;
  for (int i = 0; i < count; i++)
    if (gpus[i] < 0 || gpus[i] >= n->gpus) return SIM_NET_EINVAL;
  uint64_t t = t0_ns;
  sim_net_advance(n, t);
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < count; i++) {
      int32_t id = sim_net_flow_start(n, gpus[i], gpus[(i + 1) % count], bytes_per_step, tag, t);
      if (id < 0) return id;
    }
    wait_done(n, count, &t);
    sim_net_advance(n, t);
  }
  *t_end_ns = t;
  return 0;
}

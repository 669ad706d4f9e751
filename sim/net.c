/* sim/net.c: network topology, routing and max-min fair flow sharing; see
 * net.h for the model. Internally rates are bytes per ns (1 GB/s = 1 B/ns)
 * and all times are integer ns. */
#include "sim/net.h"

#include "sim/heap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { UP = 0, DOWN = 1 };        /* link direction, also OUT/IN for NVLink */
enum { CHUNK_SHIFT = 10, CHUNK = 1 << CHUNK_SHIFT };
enum { FREE = 0 };                /* flow state besides sim_net_flow_state */

/* Fabric shape derived from the config; the same for CLOS3 and FATTREE. */
typedef struct fabric {
  int nic_per_tor;   /* NIC links under one ToR */
  int up;            /* ToR uplinks = aggregation switches per pod (2 tiers: spines) */
  int tors_per_pod;  /* agg down ports */
  int spine_up;      /* agg uplinks to its spine plane; 0 for two tiers */
  int max_pods;      /* spine down ports (1 for two tiers) */
  int pods;          /* pods in use; ToR index space = pods * tors_per_pod */
  int groups;        /* CLOS3: node groups (ToR sets) */
  int pods_per_rail; /* CLOS3 by rail */
  double nic_Bpns, tor_up_Bpns, agg_up_Bpns, nvl_Bpns;
} fabric;

typedef struct link {
  double cap;                 /* capacity, bytes/ns */
  double load;                /* invariant: sum of rates of `flows`, bytes/ns */
  double demand;              /* invariant: sum of bounds of `flows`, bytes/ns */
  int32_t *flows;             /* ids of the active flows crossing it */
  int32_t nflows, capflows, max_flows;
  uint64_t t_upd_ns;          /* counters below are settled up to here */
  double bytes;
  uint64_t busy_ns, full_ns;
  uint32_t mark;              /* component search epoch */
  uint8_t dirty;              /* in net->dirty */
  double rem;                 /* water-filling: capacity not yet given out */
  int32_t unfixed;            /* water-filling: flows without a rate yet */
  sim_heap_node fill;         /* water-filling: key = rem/unfixed */
} link;

typedef struct flow {
  sim_heap_node ev;           /* key: drain time (ACTIVE) or completion (DRAINED) */
  double left;                /* bytes not sent at t_upd_ns */
  double rate, new_rate;      /* bytes/ns */
  double bound;               /* smallest capacity on the path, bytes/ns */
  sim_heap_node fill;         /* water-filling: key = bound */
  uint64_t t_upd_ns, t_start_ns, bytes, tag, lat_ns, serial;
  int32_t id, src, dst, next_free;
  uint32_t mark, fixed;       /* component / water-filling epochs */
  int8_t nlinks, state;
  int32_t link[SIM_NET_MAX_HOPS];
  int32_t pos[SIM_NET_MAX_HOPS]; /* invariant: links[link[i]].flows[pos[i]] == this id */
} flow;

struct sim_net {
  sim_net_cfg cfg;
  fabric fab;
  int gpus, nics;
  int ul, sk;                 /* link slots per ToR (j) and per agg (k): 1 when ideal */
  int32_t base_nic, base_tor, base_agg, nlinks;
  link *links;
  flow **chunk;               /* flow pool: id -> chunk[id >> CHUNK_SHIFT][id & (CHUNK-1)] */
  int32_t nchunk, free_head, nlive, nactive;
  sim_heap ev;                /* one node per live, not yet completed flow */
  sim_heap fill;
  uint64_t now_ns, serial;
  uint32_t epoch;
  int32_t *dirty, ndirty;     /* links touched since the last refill; capacity nlinks */
  int32_t *dirty_f, ndirty_f; /* flows started since the last refill; capacity = pool */
  int32_t *comp_l, *comp_f;   /* component scratch: capacity nlinks, nchunk*CHUNK */
  sim_net_done *done;         /* completed, not popped: done[head..n) */
  int32_t done_head, done_n, done_cap;
};

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

/* ---- flow pool ---------------------------------------------------------- */

static inline flow *F(const sim_net *n, int32_t id) {
  return &n->chunk[id >> CHUNK_SHIFT][id & (CHUNK - 1)];
}

/* Add one chunk of CHUNK flows to the free list; comp_f grows to match. */
static int pool_grow(sim_net *n) {
  flow **ch = realloc(n->chunk, (size_t)(n->nchunk + 1) * sizeof *ch);
  if (!ch) return -1;
  n->chunk = ch;
  int32_t *cf = realloc(n->comp_f, (size_t)(n->nchunk + 1) * CHUNK * sizeof *cf);
  if (!cf) return -1;
  n->comp_f = cf;
  int32_t *df = realloc(n->dirty_f, (size_t)(n->nchunk + 1) * CHUNK * sizeof *df);
  if (!df) return -1;
  n->dirty_f = df;
  /* fill holds at most every link and every flow once: it never grows mid-refill */
  if (sim_heap_reserve(&n->fill, (size_t)n->nlinks + (size_t)(n->nchunk + 1) * CHUNK)) return -1;
  flow *c = calloc(CHUNK, sizeof *c);
  if (!c) return -1;
  ch[n->nchunk] = c;
  for (int i = CHUNK - 1; i >= 0; i--) {
    c[i].id = n->nchunk * CHUNK + i;
    c[i].next_free = n->free_head;
    sim_heap_node_init(&c[i].ev);
    sim_heap_node_init(&c[i].fill);
    n->free_head = n->nchunk * CHUNK + i;
  }
  n->nchunk++;
  return 0;
}

/* Reserve a flow id and room for its completion record. */
static int32_t flow_alloc(sim_net *n) {
  if (n->free_head < 0 && pool_grow(n)) return -1;
  if (n->done_cap <= n->nlive) {
    int32_t cap = n->done_cap ? 2 * n->done_cap : 1024;
    sim_net_done *d = realloc(n->done, (size_t)cap * sizeof *d);
    if (!d) return -1;
    n->done = d;
    n->done_cap = cap;
  }
  int32_t id = n->free_head;
  n->free_head = F(n, id)->next_free;
  n->nlive++;
  return id;
}

static void flow_release(sim_net *n, int32_t id) {
  flow *f = F(n, id);
  f->state = FREE;
  f->next_free = n->free_head;
  n->free_head = id;
  n->nlive--;
}

/* ---- links: membership and counters ------------------------------------- */

/* Bring l's counters up to now; O(1). */
static void settle(link *l, uint64_t now) {
  uint64_t dt = now - l->t_upd_ns;
  if (!dt) return;
  l->bytes += l->load * (double)dt;
  if (l->nflows) l->busy_ns += dt;
  if (l->load >= l->cap * (1 - 1e-9)) l->full_ns += dt;
  l->t_upd_ns = now;
}

static void mark_dirty(sim_net *n, int32_t l) {
  if (n->links[l].dirty) return;
  n->links[l].dirty = 1;
  n->dirty[n->ndirty++] = l;
}

static int link_add(link *l, int32_t id, int32_t *pos) {
  if (l->nflows == l->capflows) {
    int32_t cap = l->capflows ? 2 * l->capflows : 4;
    int32_t *v = realloc(l->flows, (size_t)cap * sizeof *v);
    if (!v) return -1;
    l->flows = v;
    l->capflows = cap;
  }
  *pos = l->nflows;
  l->flows[l->nflows++] = id;
  if (l->nflows > l->max_flows) l->max_flows = l->nflows;
  return 0;
}

/* Remove the flow at `pos` of link lid by moving the last one into its place. */
static void link_del(sim_net *n, int32_t lid, int32_t pos) {
  link *l = &n->links[lid];
  int32_t moved = l->flows[--l->nflows];
  if (pos == l->nflows) return;
  l->flows[pos] = moved;
  flow *m = F(n, moved);
  for (int i = 0; i < m->nlinks; i++)
    if (m->link[i] == lid) m->pos[i] = pos;
}

/* ---- max-min fair rates -------------------------------------------------- */

/* Coupling links. A flow never gets more than its bound b_f = the smallest
 * capacity on its path. A link whose demand (sum of b_f of its flows) is at
 * most its capacity can never be over-subscribed, so it constrains no flow
 * beyond b_f and ties no flows together: max-min over the other ("coupling")
 * links plus a private cap b_f per flow gives the same (unique) allocation.
 * Only coupling links join flows into components; this keeps components
 * small (e.g. MegaScale's 400G uplinks carrying two 200G flows never
 * couple; ideal-ECMP aggregate links almost never do). Equality within
 * 1e-12 counts as not coupling (an overload of at most that fraction). */
static int coupling(const link *l) { return l->demand > l->cap * (1 + 1e-12); }

/* Positive doubles order like their bit patterns read as uint64. */
static uint64_t share_key(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Add flow id to the component, and its unvisited coupling links. */
static void take_flow(sim_net *n, int32_t id, int32_t *nl, int32_t *nf) {
  flow *f = F(n, id);
  if (f->mark == n->epoch) return;
  f->mark = n->epoch;
  n->comp_f[(*nf)++] = id;
  for (int h = 0; h < f->nlinks; h++) {
    link *m = &n->links[f->link[h]];
    if (m->mark != n->epoch && coupling(m)) m->mark = n->epoch, n->comp_l[(*nl)++] = f->link[h];
  }
}

/* Collect into comp_l (coupling links) and comp_f (active flows) the
 * closure, under "flow crosses coupling link", of: the flows started since
 * the last refill, every flow on a dirty link (its rate may have depended on
 * that link), and the dirty links that are coupling. O(component). */
static int32_t collect(sim_net *n, int32_t *nl_out) {
  uint32_t ep = ++n->epoch;
  int32_t nl = 0, nf = 0;
  for (int32_t i = 0; i < n->ndirty; i++) {
    int32_t lid = n->dirty[i];
    link *l = &n->links[lid];
    l->dirty = 0;
    if (l->mark == ep) continue;
    l->mark = ep;
    if (coupling(l))
      n->comp_l[nl++] = lid;
    else
      for (int32_t q = 0; q < l->nflows; q++) take_flow(n, l->flows[q], &nl, &nf);
  }
  for (int32_t i = 0; i < n->ndirty_f; i++)
    if (F(n, n->dirty_f[i])->state == SIM_NET_FLOW_ACTIVE) take_flow(n, n->dirty_f[i], &nl, &nf);
  n->ndirty = n->ndirty_f = 0;
  for (int32_t i = 0; i < nl; i++) {
    link *l = &n->links[n->comp_l[i]];
    for (int32_t q = 0; q < l->nflows; q++) take_flow(n, l->flows[q], &nl, &nf);
  }
  *nl_out = nl;
  return nf;
}

/* Fix flow f at rate s: out of the fill heap; its coupling links other than
 * `from` give s away (and leave the heap once all their flows are fixed). */
static void fix_flow(sim_net *n, flow *f, int32_t from, double s) {
  f->fixed = n->epoch;
  f->new_rate = s;
  if (sim_heap_queued(&f->fill)) sim_heap_remove(&n->fill, &f->fill);
  for (int h = 0; h < f->nlinks; h++) {
    int32_t mid = f->link[h];
    link *m = &n->links[mid];
    if (mid == from || !coupling(m)) continue;
    m->rem = m->rem > s ? m->rem - s : 0;
    if (--m->unfixed == 0)
      sim_heap_remove(&n->fill, &m->fill);
    else
      sim_heap_update(&n->fill, &m->fill, share_key(m->rem / m->unfixed), (uint64_t)mid);
  }
}

/* Progressive filling over the component: repeatedly take the smallest of
 * the coupling links' fair shares rem/unfixed and the flows' bounds; a link
 * fixes all its unfixed flows at its share, a flow fixes itself at its bound.
 * Heap seq: link id, or nlinks + flow id, so ties are deterministic.
 * O(sum of path lengths x log(component)). */
static void waterfill(sim_net *n, int32_t nl, int32_t nf) {
  for (int32_t i = 0; i < nl; i++) {
    link *l = &n->links[n->comp_l[i]];
    l->rem = l->cap;
    l->unfixed = l->nflows;
    sim_heap_push(&n->fill, &l->fill, share_key(l->rem / l->unfixed), (uint64_t)n->comp_l[i]);
  }
  for (int32_t i = 0; i < nf; i++) {
    flow *f = F(n, n->comp_f[i]);
    sim_heap_push(&n->fill, &f->fill, share_key(f->bound), (uint64_t)n->nlinks + (uint64_t)f->id);
  }
  sim_heap_node *x;
  while ((x = sim_heap_pop(&n->fill))) {
    if (x->seq >= (uint64_t)n->nlinks) {
      flow *f = SIM_HEAP_ENTRY(x, flow, fill);
      fix_flow(n, f, -1, f->bound);
      continue;
    }
    link *l = SIM_HEAP_ENTRY(x, link, fill);
    int32_t lid = (int32_t)(l - n->links);
    double s = l->rem / l->unfixed;
    l->unfixed = 0;
    for (int32_t q = 0; q < l->nflows; q++) {
      flow *f = F(n, l->flows[q]);
      if (f->fixed != n->epoch) fix_flow(n, f, lid, s);
    }
  }
}

/* ceil of a duration in ns, ignoring float noise below 1e-6 ns. */
static uint64_t ceil_ns(double x) {
  if (!(x > 1e-6)) return 0;
  if (x > 4.0e18) return (uint64_t)4e18;
  return (uint64_t)ceil(x - 1e-6);
}

/* Bytes sent since t_upd_ns are taken off `left`. */
static void progress(flow *f, uint64_t now) {
  f->left -= f->rate * (double)(now - f->t_upd_ns);
  f->t_upd_ns = now;
}

/* New rate for f from now on: settle its links, move their loads, re-key
 * its drain. O(path + log flows). */
static void set_rate(sim_net *n, flow *f, double rate) {
  for (int h = 0; h < f->nlinks; h++) {
    link *l = &n->links[f->link[h]];
    settle(l, n->now_ns);
    l->load += rate - f->rate;
    if (l->load < 0) l->load = 0;
  }
  progress(f, n->now_ns);
  f->rate = rate;
  uint64_t t = n->now_ns + ceil_ns(f->left / rate);
  sim_heap_update(&n->ev, &f->ev, t, f->serial);
}

/* Recompute max-min rates of the component touched since the last call;
 * flows whose rate is unchanged keep their drain time untouched. */
static void refill(sim_net *n) {
  int32_t nl;
  int32_t nf = collect(n, &nl);
  waterfill(n, nl, nf);
  for (int32_t i = 0; i < nf; i++) {
    flow *f = F(n, n->comp_f[i]);
    if (f->new_rate != f->rate) set_rate(n, f, f->new_rate);
  }
}

static int need_refill(const sim_net *n) { return n->ndirty || n->ndirty_f; }

/* ---- flows --------------------------------------------------------------- */

/* Leave all links; a link that was coupling is dirty (its flows may speed
 * up, or stop being coupled). */
static void flow_detach(sim_net *n, flow *f) {
  for (int h = 0; h < f->nlinks; h++) {
    link *l = &n->links[f->link[h]];
    settle(l, n->now_ns);
    if (coupling(l)) mark_dirty(n, f->link[h]);
    link_del(n, f->link[h], f->pos[h]);
    l->load = l->nflows && l->load > f->rate ? l->load - f->rate : 0;
    l->demand = l->nflows ? l->demand - f->bound : 0;
  }
}

/* Join all links; a link that is coupling afterwards is dirty. The flow is
 * queued for the next refill. */
static int flow_attach(sim_net *n, flow *f, int32_t id) {
  for (int h = 0; h < f->nlinks; h++) {
    link *l = &n->links[f->link[h]];
    settle(l, n->now_ns); /* busy time depends on nflows */
    if (link_add(l, id, &f->pos[h])) {
      f->nlinks = (int8_t)h; /* undo the links already joined */
      flow_detach(n, f);
      return -1;
    }
    l->demand += f->bound;
    if (coupling(l)) mark_dirty(n, f->link[h]);
  }
  if (f->nlinks) n->dirty_f[n->ndirty_f++] = id;
  return 0;
}

/* Smallest capacity on the path: no rate can exceed it. */
static double path_bound(const sim_net *n, const flow *f) {
  double b = INFINITY;
  for (int h = 0; h < f->nlinks; h++) b = fmin(b, n->links[f->link[h]].cap);
  return b;
}

int32_t sim_net_flow_start(sim_net *n, int src, int dst, uint64_t bytes, uint64_t tag,
                           uint64_t now_ns) {
  sim_net_path p;
  if (now_ns < n->now_ns || sim_net_route(n, src, dst, tag, &p)) return SIM_NET_EINVAL;
  sim_net_advance(n, now_ns);
  int32_t id = flow_alloc(n);
  if (id < 0) return SIM_NET_ENOMEM;
  flow *f = F(n, id);
  f->src = src, f->dst = dst, f->bytes = bytes, f->tag = tag;
  f->t_start_ns = f->t_upd_ns = now_ns;
  f->left = (double)bytes;
  f->rate = f->new_rate = 0;
  f->lat_ns = p.lat_ns;
  f->serial = n->serial++;
  f->state = SIM_NET_FLOW_ACTIVE;
  f->nlinks = bytes ? (int8_t)p.nlinks : 0; /* nothing to send: no bandwidth */
  memcpy(f->link, p.link, sizeof p.link);
  f->bound = path_bound(n, f);
  /* until the next refill gives it a rate, it drains "never" */
  uint64_t key = f->nlinks ? UINT64_MAX : now_ns;
  if (flow_attach(n, f, id)) {
    flow_release(n, id);
    return SIM_NET_ENOMEM;
  }
  if (sim_heap_push(&n->ev, &f->ev, key, f->serial)) {
    flow_detach(n, f);
    if (f->nlinks) n->ndirty_f--; /* flow_attach queued it last */
    flow_release(n, id);
    return SIM_NET_ENOMEM;
  }
  n->nactive++;
  return id;
}

/* The flow's bytes are out: free its links, complete lat_ns later. */
static void on_drain(sim_net *n, flow *f) {
  flow_detach(n, f);
  f->left = 0;
  f->rate = 0;
  f->t_upd_ns = n->now_ns;
  f->state = SIM_NET_FLOW_DRAINED;
  n->nactive--;
  sim_heap_push(&n->ev, &f->ev, n->now_ns + f->lat_ns, f->serial); /* cannot grow: node was popped */
}

/* Queue the completion record; flow_alloc keeps done_cap > live flows, so
 * compacting the queue always makes room. */
static void on_done(sim_net *n, flow *f) {
  f->state = SIM_NET_FLOW_DONE;
  if (n->done_n == n->done_cap) {
    n->done_n -= n->done_head;
    memmove(n->done, n->done + n->done_head, (size_t)n->done_n * sizeof *n->done);
    n->done_head = 0;
  }
  sim_net_done *d = &n->done[n->done_n++];
  d->flow = f->id;
  d->src = f->src, d->dst = f->dst;
  d->bytes = f->bytes, d->tag = f->tag;
  d->t_start_ns = f->t_start_ns;
  d->t_done_ns = n->now_ns;
}

/* Handle every event at exactly the current time, in (time, serial) order. */
static void run_now(sim_net *n) {
  sim_heap_node *x;
  while ((x = sim_heap_peek(&n->ev)) && x->t_ns == n->now_ns) {
    sim_heap_pop(&n->ev);
    flow *f = SIM_HEAP_ENTRY(x, flow, ev);
    if (f->state == SIM_NET_FLOW_ACTIVE)
      on_drain(n, f);
    else
      on_done(n, f);
  }
}

int sim_net_next_event(sim_net *n, uint64_t *t_ns) {
  if (need_refill(n)) refill(n);
  sim_heap_node *x = sim_heap_peek(&n->ev);
  if (!x) return 0;
  *t_ns = x->t_ns;
  return 1;
}

/* Events at the current time are handled before any refill: their times are
 * already final, and flows started at this same time then share one refill. */
void sim_net_advance(sim_net *n, uint64_t t_ns) {
  for (;;) {
    sim_heap_node *x = sim_heap_peek(&n->ev);
    if (need_refill(n) && t_ns > n->now_ns && (!x || x->t_ns > n->now_ns)) {
      refill(n);
      x = sim_heap_peek(&n->ev);
    }
    if (!x || x->t_ns > t_ns) break;
    n->now_ns = x->t_ns;
    run_now(n);
  }
  if (t_ns > n->now_ns) n->now_ns = t_ns;
}

int sim_net_pop_done(sim_net *n, sim_net_done *out) {
  if (n->done_head == n->done_n) return 0;
  *out = n->done[n->done_head++];
  flow_release(n, out->flow);
  if (n->done_head == n->done_n) n->done_head = n->done_n = 0;
  return 1;
}

int sim_net_flow_get(sim_net *n, int32_t id, sim_net_flow_info *o) {
  if (id < 0 || id >= n->nchunk * CHUNK || F(n, id)->state == FREE) return -1;
  if (need_refill(n)) refill(n);
  const flow *f = F(n, id);
  o->src = f->src, o->dst = f->dst;
  o->bytes = f->bytes, o->tag = f->tag;
  o->t_start_ns = f->t_start_ns;
  o->state = (sim_net_flow_state)f->state;
  o->rate_Bps = f->rate * 1e9;
  o->left_bytes = f->left - f->rate * (double)(n->now_ns - f->t_upd_ns);
  o->t_event_ns = f->state == SIM_NET_FLOW_DONE ? n->now_ns : f->ev.t_ns;
  sim_net_route(n, f->src, f->dst, f->tag, &o->path);
  return 0;
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
  if (need_refill(n)) refill(n);
  link *k = &n->links[l];
  settle(k, n->now_ns);
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

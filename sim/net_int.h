/* sim/net_int.h: the network model's state, shared by its two halves:
 * the fabric (sim/net.c: configuration, topology, routing, construction,
 * link statistics, ring collectives) and the flows (sim/net_flow.c: the
 * flow pool, link membership, max-min fair rates, flow events). Not for
 * users of sim/net.h. Internally rates are bytes per ns (1 GB/s = 1 B/ns)
 * and all times are integer ns. */
#ifndef SIM_NET_INT_H
#define SIM_NET_INT_H

#include "sim/heap.h"
#include "sim/net.h"

#include <stdint.h>

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


/* Link l with the rates current and its counters settled up to now
 * (net_flow.c), for its statistics. */
link *net_link_now(sim_net *n, int32_t l);

#endif

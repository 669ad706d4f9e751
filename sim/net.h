/* sim/net.h: the simulated network. Topology (NVLink inside a node; a
 * multi-rail 3-tier Clos as in MegaScale, or a generic fat-tree between
 * nodes) plus flow-level bandwidth sharing (max-min fair, progressive
 * filling), driven as one event source by a discrete-event engine.
 *
 * Units: time is integer ns (uint64_t *_ns); sizes are bytes; configured
 * rates say their unit in the name: *_gbps = gigabits/s (1e9 bit/s),
 * *_GBps = gigabytes/s (1e9 byte/s); reported rates are bytes/s (*_Bps).
 *
 * Model.
 * - Links are directed with a capacity. Each GPU has an NVLink egress and an
 *   ingress link (NVSwitch itself is non-blocking). Each NIC has an up link
 *   (NIC -> ToR) and a down link (ToR -> NIC). Each ToR has `up` links to the
 *   aggregation switches of its pod and as many down links back; each
 *   aggregation switch has links to and from its spine plane. The spine tier
 *   is non-blocking (its ports are the agg links' other ends).
 * - A flow (src GPU, dst GPU, bytes, tag) follows one path: same node ->
 *   nvl_out(src), nvl_in(dst); same ToR -> nic_up, nic_down; same pod ->
 *   nic_up, tor_up, tor_down, nic_down; else nic_up, tor_up, agg_up,
 *   agg_down, tor_down, nic_down. Inter-node traffic leaves through the
 *   source GPU's NIC (its rail) and enters through the destination GPU's.
 * - ECMP: SIM_NET_ECMP_HASH picks the ToR uplink j and the spine k from a
 *   hash of (src, dst, tag, ecmp_seed), so collisions happen as in real
 *   ECMP; SIM_NET_ECMP_IDEAL splits every flow evenly over all equal-cost
 *   paths, which is exactly one aggregated link per ToR (and per pod) with
 *   the summed capacity.
 * - Rates: max-min fair over the active flows (progressive filling),
 *   recomputed lazily, before the next query, only for the flows touched by
 *   starts and drains since the last computation plus everything connected
 *   to them through "coupling" links; other flows keep their rates. A link
 *   couples only if the sum of its flows' bounds (a flow's bound = smallest
 *   capacity on its path) exceeds its capacity; other links cannot limit
 *   anyone, so e.g. a 400G uplink with two 200G flows joins nothing. Cost:
 *   O(sum of path lengths in that component x log of its size).
 * - Latency: a flow holds bandwidth from its start until its bytes are sent
 *   (the "drain", rounded up to an integer ns), and completes lat_ns later,
 *   where lat_ns = lat_nvlink_ns inside a node, else lat_nic_ns +
 *   switches x lat_switch_ns. So an idle path gives t_done = t_start +
 *   ceil(bytes / rate) + lat_ns.
 *
 * Use from an event engine: the network is one event source.
 *   id = sim_net_flow_start(net, src, dst, bytes, tag, now_ns);  (any number)
 *   if (sim_net_next_event(net, &t)) schedule "network" at t;
 *   at t: sim_net_advance(net, t); while (sim_net_pop_done(net, &d)) ...;
 * After starting flows, re-ask sim_net_next_event (a new flow may move it);
 * ask once per batch of starts at one time: each ask recomputes rates.
 * Why no next_completion(): when a flow drains, max-min rates of others can
 * go up or down, so a completion projected now is final only once the network
 * reaches it; next_event() returns the next internal change (drain) or
 * completion, whichever is first, and is exact.
 *
 * Determinism: the same calls in the same order give bit-identical times.
 * Ties are broken by flow start order, then link index.
 */
#ifndef SIM_NET_H
#define SIM_NET_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  SIM_NET_CLOS3 = 1,  /* MegaScale: rail-optimised 3-tier Clos */
  SIM_NET_FATTREE = 2 /* generic 2- or 3-tier fat-tree, NICs node-major on ToRs */
} sim_net_fabric;

typedef enum {
  SIM_NET_POD_BY_RAIL = 0, /* CLOS3: a pod holds ToRs of one rail (same-rail traffic never crosses the spine) */
  SIM_NET_POD_BY_NODES = 1 /* CLOS3: a pod holds whole ToR sets (all rails of consecutive node groups) */
} sim_net_pod_layout;

typedef enum {
  SIM_NET_ECMP_HASH = 0, /* one path per flow from a hash: collisions as in real ECMP */
  SIM_NET_ECMP_IDEAL = 1 /* every flow split evenly over all equal-cost paths */
} sim_net_ecmp;

/* Configuration. sim_net_cfg_megascale() fills MegaScale's values. */
typedef struct sim_net_cfg {
  int nodes;               /* servers, >= 1 */
  int gpus_per_node;       /* GPUs per server, >= 1 (MegaScale: 8) */
  int nics_per_node;       /* NICs per server, divides gpus_per_node; NIC r is rail r and
                              serves GPUs r*g/n .. (r+1)*g/n-1 (MegaScale: 8, one per GPU) */
  double nvlink_GBps;      /* NVLink per GPU per direction, GB/s, > 0 (A100 SXM: 300) */
  double nic_gbps;         /* NIC line rate per direction, Gb/s, > 0 (MegaScale: 200) */
  sim_net_fabric fabric;   /* SIM_NET_CLOS3 or SIM_NET_FATTREE */
  int switch_ports;        /* switch radix, even, >= 4 (Tomahawk 4: 64) */
  double switch_port_gbps; /* switch port rate above the ToR, Gb/s, > 0 (400) */
  /* CLOS3 only: each tier 32 down / 32 up (radix/2 each); the spine uses all
   * radix ports down, so at most `switch_ports` pods. */
  int tor_split;                 /* ToR down port split into this many NIC links, >= 1 (2: 400G -> 2 x 200G);
                                    nodes per ToR = switch_ports/2 * tor_split (64) */
  sim_net_pod_layout pod_layout; /* which ToRs share a pod (radix/2 ToRs per pod) */
  /* FATTREE only: ToR down ports run at nic_gbps (one NIC each), up ports at
   * switch_port_gbps; aggregation and spine are non-blocking. */
  int tiers;          /* 2 (leaf-spine: at most radix ToRs) or 3 (at most radix pods of radix/2 ToRs) */
  double tor_oversub; /* ToR down:up port ratio, >= 1 (1 = radix/2 down, radix/2 up) */
  /* both */
  sim_net_ecmp ecmp;      /* path choice among equal-cost uplinks */
  uint64_t ecmp_seed;     /* salt of the ECMP hash */
  uint64_t lat_nvlink_ns; /* latency of an intra-node flow, ns */
  uint64_t lat_nic_ns;    /* latency of an inter-node flow before switches (both NICs, wire), ns */
  uint64_t lat_switch_ns; /* added per switch crossed, ns */
} sim_net_cfg;

/* MegaScale cluster (megascale-targets.md, "Cluster"): `nodes` servers of 8
 * GPUs, NVLink 300 GB/s per direction (A100 SXM; the paper is silent), 8 x
 * 200 Gb/s NICs, 3-tier Clos of 64 x 400G switches, ToR ports split 2 x 200G,
 * pods by rail, ECMP hashing. Latencies are assumptions until calibrated:
 * NVLink 1000 ns, NIC path 2000 ns, 500 ns per switch. */
void sim_net_cfg_megascale(sim_net_cfg *cfg, int nodes);

/* Check a configuration; 0 if valid, else -1 and one line in err naming the
 * field, its value and what is allowed. err may be NULL. */
int sim_net_cfg_check(const sim_net_cfg *cfg, char *err, size_t err_len);

typedef struct sim_net sim_net;

/* Build the network (idle, time 0). NULL on a bad config (message in err) or
 * out of memory. Memory O(gpus + switch links). */
sim_net *sim_net_new(const sim_net_cfg *cfg, char *err, size_t err_len);
void sim_net_free(sim_net *net);

/* ---- topology ----------------------------------------------------------- */

enum { SIM_NET_MAX_HOPS = 6 };

typedef enum {
  SIM_NET_NVL_OUT, SIM_NET_NVL_IN, /* GPU NVLink egress / ingress */
  SIM_NET_NIC_UP, SIM_NET_NIC_DOWN, /* NIC -> ToR, ToR -> NIC */
  SIM_NET_TOR_UP, SIM_NET_TOR_DOWN, /* ToR -> agg, agg -> ToR (ideal ECMP: all of a ToR's) */
  SIM_NET_AGG_UP, SIM_NET_AGG_DOWN  /* agg -> spine, spine -> agg (ideal ECMP: all of a pod's) */
} sim_net_link_kind;

typedef struct sim_net_path {
  int nlinks;                   /* links crossed, 0 (src == dst) to SIM_NET_MAX_HOPS */
  int32_t link[SIM_NET_MAX_HOPS];
  int nswitches;                /* network switches crossed (NVSwitch not counted) */
  uint64_t lat_ns;              /* latency added to a flow on this path */
} sim_net_path;

typedef struct sim_net_loc {
  int node, local;   /* server and GPU index in it */
  int nic;           /* global NIC index (node * nics_per_node + rail) */
  int rail;          /* NIC index inside the node */
  int tor, pod;      /* ToR and pod of that NIC */
} sim_net_loc;

int sim_net_gpus(const sim_net *net);
int sim_net_link_count(const sim_net *net);
/* Where GPU g sits; -1 if g is out of range. */
int sim_net_gpu_loc(const sim_net *net, int gpu, sim_net_loc *out);
/* The path a flow (src, dst, tag) takes; -1 if a GPU is out of range. */
int sim_net_route(const sim_net *net, int src, int dst, uint64_t tag, sim_net_path *out);

/* ---- flows -------------------------------------------------------------- */

/* Errors returned by the flow calls. */
enum { SIM_NET_EINVAL = -1, SIM_NET_ENOMEM = -2, SIM_NET_EBUSY = -3 };

/* Start a flow of `bytes` from GPU src to GPU dst at now_ns (>= the network's
 * time; the network first advances to now_ns). Returns a flow id >= 0, valid
 * until its completion is popped, or SIM_NET_EINVAL / SIM_NET_ENOMEM. Ids
 * are dense (below the most flows ever live at once, rounded up to 1024), so
 * an engine can keep per-flow data in an array indexed by id. `tag` feeds the
 * ECMP hash (e.g. a connection or channel number).
 * src == dst or bytes == 0 complete at now_ns + path latency. O(path). */
int32_t sim_net_flow_start(sim_net *net, int src, int dst, uint64_t bytes,
                           uint64_t tag, uint64_t now_ns);

/* Earliest time the network changes state (a flow drains or completes), given
 * no other start before it. Returns 1 and sets *t_ns, or 0 when idle.
 * Recomputes rates first if flows started or drained since the last time. */
int sim_net_next_event(sim_net *net, uint64_t *t_ns);

/* Process every drain and completion with time <= t_ns, in time order, then
 * set the network's time to t_ns (t_ns >= current time). Completed flows
 * queue up for sim_net_pop_done in (time, start order). */
void sim_net_advance(sim_net *net, uint64_t t_ns);

/* The network's current time, ns. */
uint64_t sim_net_now(const sim_net *net);

typedef struct sim_net_done {
  int32_t flow;
  int src, dst;
  uint64_t bytes, tag;
  uint64_t t_start_ns, t_done_ns;
} sim_net_done;

/* Pop the oldest completed flow: returns 1 and fills *out, or 0 when none.
 * The flow's id becomes free for reuse. */
int sim_net_pop_done(sim_net *net, sim_net_done *out);


typedef enum { SIM_NET_FLOW_ACTIVE = 1, SIM_NET_FLOW_DRAINED = 2, SIM_NET_FLOW_DONE = 3 } sim_net_flow_state;

typedef struct sim_net_flow_info {
  int src, dst;
  uint64_t bytes, tag, t_start_ns;
  sim_net_flow_state state;
  double rate_Bps;    /* current max-min rate, bytes/s (0 once drained) */
  double left_bytes;  /* bytes still to send at the network's current time */
  uint64_t t_event_ns;/* projected drain (ACTIVE) or completion (DRAINED) time */
  sim_net_path path;
} sim_net_flow_info;

/* State of a live flow (recomputes rates first); -1 if id is not live. */
int sim_net_flow_get(sim_net *net, int32_t flow, sim_net_flow_info *out);

/* ---- utilisation -------------------------------------------------------- */

typedef struct sim_net_link_stats {
  sim_net_link_kind kind;
  int owner;          /* GPU (NVL), NIC (NIC), ToR (TOR) or pod (AGG) */
  int port;           /* ToR uplink j / agg plane j (-1 for NVL, NIC, ideal) */
  int port2;          /* agg -> spine index k (-1 otherwise) */
  double cap_Bps;     /* capacity, bytes/s */
  double bytes;       /* bytes carried so far */
  uint64_t busy_ns;   /* time with at least one flow */
  uint64_t full_ns;   /* time at full capacity (a bottleneck: contention) */
  int flows;          /* flows on it now */
  int max_flows;      /* most flows at once */
} sim_net_link_stats;

/* Counters of a link up to the network's current time; -1 if out of range. */
int sim_net_link_stats_get(sim_net *net, int link, sim_net_link_stats *out);
/* A readable name such as "tor_up tor=3 j=17"; returns snprintf's result. */
int sim_net_link_name(const sim_net *net, int link, char *buf, size_t len);

/* ---- collectives (helper for tests and calibration) --------------------- */

/* Run `steps` steps of a ring over gpus[0..n-1] on an otherwise idle network
 * starting at t0_ns: each step starts n flows gpus[i] -> gpus[(i+1)%n] of
 * bytes_per_step (same tag every step, as one connection), and the next step
 * starts when the last of them completes (a barrier per step: on an idle,
 * symmetric ring every rank is ready at that moment). A ring all-reduce of S
 * bytes is steps = 2(n-1), bytes_per_step = S/n. Sets *t_end_ns. Returns 0,
 * SIM_NET_EBUSY if flows are in flight, or SIM_NET_EINVAL / SIM_NET_ENOMEM. */
int sim_net_ring_run(sim_net *net, const int *gpus, int n, uint64_t bytes_per_step,
                     int steps, uint64_t tag, uint64_t t0_ns, uint64_t *t_end_ns);

#endif

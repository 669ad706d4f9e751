/* sim/net_flow.c: the flow half of the network model (net.h): the flow
 * pool, link membership and counters, max-min fair rates by water-filling
 * over the components a change touches, and flow events (start, drain,
 * completion). The fabric is in net.c, the shared state in net_int.h. */
#include "sim/net_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

link *net_link_now(sim_net *n, int32_t l)
{
  if (need_refill(n)) refill(n);
  settle(&n->links[l], n->now_ns);
  return &n->links[l];
}

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


/* sim/heap.c: intrusive binary min-heap on (t_ns, seq); see heap.h.
 * Sifts move a "hole" instead of swapping: each level costs one slot copy
 * and one write of the moved node's idx. */
#include "sim/heap.h"

#include <stdlib.h>

/* The descent is bound by loads of the next level; fetching the grandchildren
 * (4 consecutive slots, 2 cache lines) one level ahead hides part of it. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

static inline void prefetch_grandchildren(const sim_heap *h, size_t c) {
  size_t g = 2 * c + 1, last = h->n - 1;
  if (g <= last) PREFETCH(&h->slot[g]), PREFETCH(&h->slot[g + 3 <= last ? g + 3 : last]);
}

static inline int slot_lt(const sim_heap_slot *a, const sim_heap_slot *b) {
  return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
}

static inline void place(sim_heap *h, size_t i, sim_heap_slot s) {
  h->slot[i] = s;
  s.node->idx = i;
}

/* Put s at hole i or above; restores the invariant on the path to the root. */
static void sift_up(sim_heap *h, size_t i, sim_heap_slot s) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!slot_lt(&s, &h->slot[p])) break;
    place(h, i, h->slot[p]);
    i = p;
  }
  place(h, i, s);
}

/* Put s at hole i or below; restores the invariant in i's subtree. */
static void sift_down(sim_heap *h, size_t i, sim_heap_slot s) {
  size_t n = h->n;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    prefetch_grandchildren(h, c);
    if (c + 1 < n && slot_lt(&h->slot[c + 1], &h->slot[c])) c++;
    if (!slot_lt(&h->slot[c], &s)) break;
    place(h, i, h->slot[c]);
    i = c;
  }
  place(h, i, s);
}

/* Refill hole i with s, moving s up or down as its key requires. */
static void fix(sim_heap *h, size_t i, sim_heap_slot s) {
  if (i > 0 && slot_lt(&s, &h->slot[(i - 1) / 2]))
    sift_up(h, i, s);
  else
    sift_down(h, i, s);
}

int sim_heap_init(sim_heap *h, size_t cap_hint) {
  h->n = 0;
  h->cap = cap_hint;
  h->slot = NULL;
  if (cap_hint && !(h->slot = malloc(cap_hint * sizeof *h->slot))) return -1;
  return 0;
}

void sim_heap_free(sim_heap *h) {
  free(h->slot);
  h->slot = NULL;
  h->n = h->cap = 0;
}

int sim_heap_reserve(sim_heap *h, size_t cap) {
  if (cap <= h->cap) return 0;
  sim_heap_slot *s = realloc(h->slot, cap * sizeof *s);
  if (!s) return -1;
  h->slot = s;
  h->cap = cap;
  return 0;
}

static int grow(sim_heap *h) { return sim_heap_reserve(h, h->cap ? 2 * h->cap : 64); }

int sim_heap_push(sim_heap *h, sim_heap_node *x, uint64_t t_ns, uint64_t seq) {
  if (h->n == h->cap && grow(h)) return -1;
  x->t_ns = t_ns;
  x->seq = seq;
  sim_heap_slot s = {t_ns, seq, x};
  sift_up(h, h->n++, s);
  return 0;
}

/* Floyd's pop: walk the hole from the root down the smaller-child path to a
 * leaf (one comparison per level), then sift the last slot up from there;
 * the last slot is usually large, so it rarely moves far up. */
sim_heap_node *sim_heap_pop(sim_heap *h) {
  if (!h->n) return NULL;
  sim_heap_node *top = h->slot[0].node;
  size_t n = --h->n, i = 0, c;
  top->idx = SIM_HEAP_NONE;
  if (!n) return top;
  while ((c = 2 * i + 1) < n) {
    prefetch_grandchildren(h, c);
    if (c + 1 < n && slot_lt(&h->slot[c + 1], &h->slot[c])) c++;
    place(h, i, h->slot[c]);
    i = c;
  }
  sift_up(h, i, h->slot[n]);
  return top;
}

void sim_heap_remove(sim_heap *h, sim_heap_node *x) {
  size_t i = x->idx;
  sim_heap_slot last = h->slot[--h->n];
  x->idx = SIM_HEAP_NONE;
  if (i != h->n) fix(h, i, last);
}

void sim_heap_update(sim_heap *h, sim_heap_node *x, uint64_t t_ns, uint64_t seq) {
  x->t_ns = t_ns;
  x->seq = seq;
  sim_heap_slot s = {t_ns, seq, x};
  fix(h, x->idx, s);
}

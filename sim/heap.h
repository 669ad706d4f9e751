/* sim/heap.h: intrusive binary min-heap keyed on (t_ns, seq), the event
 * queue of the simulator and the work queue of the network's water-filling.
 *
 * Entries embed a sim_heap_node in their own struct; the heap stores a
 * pointer to the node plus a copy of its key, so comparisons never chase
 * pointers. Order is total and deterministic: (t_ns, seq) lexicographic, so
 * ties in time pop in seq order (the caller hands out increasing seqs).
 *
 * Ownership: the heap owns only its slot array; nodes belong to the caller and
 * must stay at a fixed address while in the heap (see SIM_HEAP_ENTRY).
 *
 * Complexity: push, pop, remove, update O(log n); peek O(1).
 */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define SIM_HEAP_NONE ((size_t)-1) /* idx of a node that is in no heap */

/* Embed one per heap an entry can be in. Fields are read-only to users. */
typedef struct sim_heap_node {
  uint64_t t_ns; /* primary key (time, ns; or any monotone integer key) */
  uint64_t seq;  /* tie-break key */
  size_t idx;    /* slot in the heap, SIM_HEAP_NONE when not queued */
} sim_heap_node;

typedef struct sim_heap_slot {
  uint64_t t_ns, seq;  /* copy of node's key: invariant slot[i].key == node->key */
  sim_heap_node *node; /* invariant: slot[i].node->idx == i */
} sim_heap_slot;

/* Invariant: for every i > 0, key(slot[(i-1)/2]) <= key(slot[i]). */
typedef struct sim_heap {
  sim_heap_slot *slot;
  size_t n, cap;
} sim_heap;

/* Pointer to the struct `type` whose member `member` is node `p`. */
#define SIM_HEAP_ENTRY(p, type, member) \
  ((type *)((char *)(p) - offsetof(type, member)))

/* init reserves room for cap_hint entries (0 is fine); returns 0, or -1 when
 * out of memory. free releases the slot array (not the nodes). */
int sim_heap_init(sim_heap *h, size_t cap_hint);
void sim_heap_free(sim_heap *h);
/* Make room for cap entries in all (never shrinks); 0, or -1 out of memory.
 * A push into a heap with room cannot fail. */
int sim_heap_reserve(sim_heap *h, size_t cap);

/* Mark a node as in no heap (call once before first push). */
static inline void sim_heap_node_init(sim_heap_node *x) { x->idx = SIM_HEAP_NONE; }
static inline int sim_heap_queued(const sim_heap_node *x) { return x->idx != SIM_HEAP_NONE; }
static inline size_t sim_heap_size(const sim_heap *h) { return h->n; }

/* Insert x (which must not be queued) with key (t_ns, seq). O(log n).
 * Returns 0, or -1 when the slot array cannot grow (heap unchanged). */
int sim_heap_push(sim_heap *h, sim_heap_node *x, uint64_t t_ns, uint64_t seq);

/* Minimum node, or NULL when empty. O(1). */
static inline sim_heap_node *sim_heap_peek(const sim_heap *h) {
  return h->n ? h->slot[0].node : NULL;
}

/* Remove and return the minimum node (NULL when empty). O(log n). */
sim_heap_node *sim_heap_pop(sim_heap *h);

/* Remove queued node x from anywhere in the heap. O(log n). */
void sim_heap_remove(sim_heap *h, sim_heap_node *x);

/* Change the key of queued node x, up or down. O(log n). */
void sim_heap_update(sim_heap *h, sim_heap_node *x, uint64_t t_ns, uint64_t seq);

#endif

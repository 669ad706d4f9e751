/* tests/sim/test_heap.c: the intrusive (t_ns, seq) min-heap against a plain
 * reference (linear scan for the minimum) and tie order. Its speed is a
 * benchmark, not a test: build/sim_heap_bench (sim/bench_heap.c). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "sim/heap.h"

#include "../check.h"

#include <string.h>

typedef struct item {
  int payload;
  sim_heap_node node;
} item;

/* Reference minimum: the queued item with the smallest (t_ns, seq). O(n). */
static item *ref_min(item *it, int n) {
  item *best = NULL;
  for (int i = 0; i < n; i++) {
    if (!sim_heap_queued(&it[i].node)) continue;
    if (!best || it[i].node.t_ns < best->node.t_ns ||
        (it[i].node.t_ns == best->node.t_ns && it[i].node.seq < best->node.seq))
      best = &it[i];
  }
  return best;
}

/* Random push / pop / remove / update (keys in a small range, so ties in t
 * are common) checked against the reference after every operation. */
static void test_random(void) {
  enum { N = 1500, OPS = 300000 };
  static item it[N];
  sim_heap h;
  uint64_t rng = 42, seq = 0;
  long counts[4] = {0};
  CHECK(sim_heap_init(&h, 0) == 0, "init");
  for (int i = 0; i < N; i++) it[i].payload = i, sim_heap_node_init(&it[i].node);
  for (int op = 0; op < OPS; op++) {
    item *x = &it[check_rand(&rng) % N];
    uint64_t t = check_rand(&rng) % 64;
    int kind = (int)(check_rand(&rng) % 4);
    if (!sim_heap_queued(&x->node)) {
      CHECK(sim_heap_push(&h, &x->node, t, seq++) == 0, "push");
      kind = 0;
    } else if (kind == 1) {
      item *want = ref_min(it, N);
      sim_heap_node *got = sim_heap_pop(&h);
      CHECK(got == &want->node, "op %d: pop gave item %d, reference min is item %d", op,
            SIM_HEAP_ENTRY(got, item, node)->payload, want->payload);
    } else if (kind == 2) {
      sim_heap_remove(&h, &x->node);
    } else {
      sim_heap_update(&h, &x->node, t, seq++);
      kind = 3;
    }
    counts[kind]++;
    item *want = ref_min(it, N);
    CHECK(sim_heap_peek(&h) == (want ? &want->node : NULL), "op %d: peek differs from reference", op);
  }
  /* drain: the pop sequence must be sorted */
  uint64_t pt = 0, ps = 0;
  size_t left = sim_heap_size(&h);
  for (sim_heap_node *x; (x = sim_heap_pop(&h));) {
    CHECK(x->t_ns > pt || (x->t_ns == pt && x->seq >= ps), "drain out of order");
    pt = x->t_ns, ps = x->seq;
  }
  printf("random: %d ops (push %ld, pop %ld, remove %ld, update %ld) match the reference;"
         " drained %zu in order\n", OPS, counts[0], counts[1], counts[2], counts[3], left);
  sim_heap_free(&h);
}

/* Equal times pop in seq order, whatever the push order. */
static void test_ties(void) {
  enum { N = 4096 };
  static item it[N];
  sim_heap h;
  uint64_t rng = 7;
  int order[N];
  for (int i = 0; i < N; i++) order[i] = i;
  for (int i = N - 1; i > 0; i--) {
    int j = (int)(check_rand(&rng) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  sim_heap_init(&h, 16);
  for (int i = 0; i < N; i++) {
    sim_heap_node_init(&it[order[i]].node);
    sim_heap_push(&h, &it[order[i]].node, 1000, (uint64_t)order[i]);
  }
  int bad = 0;
  for (int i = 0; i < N; i++) bad += sim_heap_pop(&h)->seq != (uint64_t)i;
  printf("ties:");
  check_eq("pops out of seq order (4096 equal t_ns)", 0, bad, "ties break by seq");
  sim_heap_free(&h);
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "all";
  if (!strcmp(which, "all") || !strcmp(which, "ref")) test_random(), test_ties();
  return check_done("sim_heap");
}

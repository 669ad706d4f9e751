/* sim/bench_heap.c: sim_heap_bench, timings of the event heap (sim/heap.h).
 * Not a test: prints wall-clock seconds and nanoseconds per operation, and
 * exits 0 whatever the timing; order is still checked, and a heap that pops
 * out of order exits 1. (Issue 3 sets no speed target for the heap alone;
 * the simulator's targets are in scripts/bench-sim.sh.)
 *
 * Workloads:
 *   hold: `pending` events queued; each step pops the earliest and pushes
 *     it again a random delay (0 to 1 ms) later, as the simulator does;
 *   fill-drain: n random keys pushed, then all popped.
 * Usage: sim_heap_bench [pending] [steps]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "sim/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct item {
  sim_heap_node node;
} item;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64*: a fixed stream, so every run times the same key sequence. */
static uint64_t rand64(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static item *items_new(sim_heap *h, size_t n) {
  item *it = malloc(n * sizeof *it);
  if (!it || sim_heap_init(h, n) != 0) {
    fprintf(stderr, "sim_heap_bench: out of memory for %zu events\n", n);
    exit(1);
  }
  return it;
}

static void out_of_order(const char *what) {
  fprintf(stderr, "sim_heap_bench: %s: the heap popped out of order\n", what);
  exit(1);
}

static double hold(size_t pending, long steps) {
  sim_heap h;
  item *it = items_new(&h, pending);
  uint64_t rng = 99, seq = 0, last = 0;
  for (size_t i = 0; i < pending; i++)
    sim_heap_node_init(&it[i].node), sim_heap_push(&h, &it[i].node, rand64(&rng) % 1000000, seq++);
  double t0 = now_s();
  for (long s = 0; s < steps; s++) {
    sim_heap_node *x = sim_heap_pop(&h);
    if (x->t_ns < last) out_of_order("hold");
    last = x->t_ns;
    sim_heap_push(&h, x, last + rand64(&rng) % 1000000, seq++);
  }
  double dt = now_s() - t0;
  sim_heap_free(&h);
  free(it);
  return dt;
}

static double fill_drain(size_t n) {
  sim_heap h;
  item *it = items_new(&h, n);
  uint64_t rng = 5, last = 0;
  double t0 = now_s();
  for (size_t i = 0; i < n; i++)
    sim_heap_node_init(&it[i].node), sim_heap_push(&h, &it[i].node, rand64(&rng) >> 20, i);
  for (size_t i = 0; i < n; i++) {
    sim_heap_node *x = sim_heap_pop(&h);
    if (x->t_ns < last) out_of_order("fill-drain");
    last = x->t_ns;
  }
  double dt = now_s() - t0;
  sim_heap_free(&h);
  free(it);
  return dt;
}

static long arg_or(int argc, char **argv, int i, long dflt) {
  if (argc <= i) return dflt;
  char *end;
  long v = strtol(argv[i], &end, 10);
  if (*end || v < 1) {
    fprintf(stderr, "sim_heap_bench: '%s' is not a positive count\nusage: sim_heap_bench [pending] [steps]\n",
            argv[i]);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  long pending = arg_or(argc, argv, 1, 100000), steps = arg_or(argc, argv, 2, 10000000);
  double dt = hold((size_t)pending, steps);
  double dt2 = fill_drain(1000000);
  printf("%-12s %10s %12s %10s %12s\n", "workload", "pending", "ops", "wall_s", "ns_per_op");
  printf("%-12s %10ld %12ld %10.3f %12.0f\n", "hold", pending, steps, dt, 1e9 * dt / (double)steps);
  printf("%-12s %10d %12d %10.3f %12.0f\n", "fill-drain", 1000000, 1000000, dt2, 1e9 * dt2 / 1e6);
  return 0;
}

/* tests/sim/check.h: tiny check helpers for the simulator tests. Every
 * check prints the expected value, the value got and where the expectation
 * comes from, then fails the test (exit 1) on a mismatch. */
#ifndef TESTS_SIM_CHECK_H
#define TESTS_SIM_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
      exit(1);                                                   \
    }                                                            \
  } while (0)

/* Integers that must be equal. `why` says where the expected value comes from. */
#define EXPECT_EQ_U64(what, expect, got, why)                                       \
  do {                                                                              \
    uint64_t e_ = (uint64_t)(expect), g_ = (uint64_t)(got);                         \
    printf("  %-44s expected %14" PRIu64 "  got %14" PRIu64 "  %s  [%s]\n", what, e_, \
           g_, e_ == g_ ? "ok" : "MISMATCH", why);                                  \
    CHECK(e_ == g_, "%s: expected %" PRIu64 ", got %" PRIu64, what, e_, g_);        \
  } while (0)

/* Reals within abs + |expect| * rel. */
#define EXPECT_NEAR(what, expect, got, abs_tol, rel_tol, why)                         \
  do {                                                                                \
    double e_ = (double)(expect), g_ = (double)(got);                                 \
    int ok_ = fabs(e_ - g_) <= (abs_tol) + fabs(e_) * (rel_tol);                      \
    printf("  %-44s expected %14.6g  got %14.6g  %s  [%s]\n", what, e_, g_,            \
           ok_ ? "ok" : "MISMATCH", why);                                             \
    CHECK(ok_, "%s: expected %.17g, got %.17g", what, e_, g_);                        \
  } while (0)

static inline double test_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64*: a fixed, seedable generator so tests are reproducible. */
static inline uint64_t test_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545f4914f6cdd1dull;
}

#endif

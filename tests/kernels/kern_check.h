/* tests/kernels/kern_check.h: the shared test helpers: a seeded generator,
 * the tolerance check with mismatch printing, and the finite-difference
 * gradient check.
 *
 * Tolerance rule (llm.c style): got passes when
 *     |got - ref| <= atol + rtol * |ref|.
 * Finite differences: central, (L(x + h) - L(x - h)) / 2h on a scalar loss
 * L = sum(out .* proj) with a fixed random proj, summed in double; the
 * analytic gradient is the backward run with dout = proj. */
#ifndef KERN_CHECK_H
#define KERN_CHECK_H
#include <stdint.h>

#include "../check.h"

typedef struct kc_rng { uint64_t s; } kc_rng;

float kc_uniform(kc_rng *r, float lo, float hi);
float *kc_rand(kc_rng *r, long n, float lo, float hi); /* malloc'd */
float *kc_zeros(long n);                               /* calloc'd */
float *kc_copy(const float *x, long n);
void kc_round_bf16(float *x, long n); /* each value -> nearest bf16 */
double kc_dot(const float *a, const float *b, long n);

/* Prints one summary line and the first few mismatches (index, got,
 * expected); returns the number of mismatches. Equal values match, so an
 * expected infinity (attention's lse of a row that sees no key) must be
 * got exactly; NaN never matches. */
int kc_compare(const char *what, const float *got, const float *ref, long n, float atol,
               float rtol);

/* Byte arrays that must match exactly (dropout's kept masks): prints
 * "what: bytes differing: expected 0, got k"; returns 1 when k > 0. */
int kc_compare_bytes(const char *what, const unsigned char *got, const unsigned char *ref, long n);

/* FD tolerance: truncation O(h^2) and fp32 rounding of L, O(ulp(L) / h). */
#define KC_FD_EPS 1e-2f
#define KC_FD_ATOL 2e-3f
#define KC_FD_RTOL 2e-2f
typedef double (*kc_loss_fn)(void *ctx);
/* Compares grad[i] with the central difference of loss() in x[i] for up to
 * nsample indices (all when n <= nsample); x is restored. Returns the
 * number of failures. */
int kc_fd_check(const char *what, float *x, const float *grad, long n, kc_loss_fn loss,
                void *ctx, kc_rng *rng, int nsample);

/* The verdict, through tests/check.h (the one assertion header): the
 * failures kc_compare and kc_fd_check counted must be 0; then check_done's
 * summary and exit code. */
static inline int kc_finish(const char *name, int failures) {
  check_eq("mismatches and finite-difference failures above", 0, failures, "kc_compare, kc_fd_check");
  return check_done(name);
}

#endif

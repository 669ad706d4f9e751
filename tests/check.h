/* tests/check.h: the assertions of megasim's C tests, one header for all
 * of them. Each check prints its proof (what, the expected value, the
 * value got, and where the expected number comes from), counts failures
 * and lets the test go on; check_done() prints the closing summary and
 * gives the exit status. CHECK() is for preconditions a test cannot go
 * on without (a setup that failed): it stops the test with file:line.
 * Also: a seedable generator and a clock, so tests are reproducible. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int check_failed_, check_passed_;

static inline int check_count_(int ok)
{
    ok ? check_passed_++ : check_failed_++;
    return ok;
}

/* |got - expected| <= rel * |expected| (+ a tiny absolute floor). */
static inline int check_rel(const char *what, double expected, double got, double rel, const char *source)
{
    int ok = fabs(got - expected) <= rel * fabs(expected) + 1e-300;
    printf("%s %-52s expected %.6g  got %.6g  (rel tol %g; %s)\n", ok ? "ok  " : "FAIL", what, expected, got,
           rel, source);
    return check_count_(ok);
}

/* |got - expected| <= abs + rel * |expected| (NaN fails). */
static inline int check_near(const char *what, double expected, double got, double abs_tol, double rel_tol,
                             const char *source)
{
    int ok = fabs(got - expected) <= abs_tol + rel_tol * fabs(expected);
    printf("%s %-52s expected %.9g  got %.9g  (tol %g + %g rel; %s)\n", ok ? "ok  " : "FAIL", what, expected, got,
           abs_tol, rel_tol, source);
    return check_count_(ok);
}

/* Integers that must be equal. */
static inline int check_eq(const char *what, long long expected, long long got, const char *source)
{
    int ok = expected == got;
    printf("%s %-52s expected %lld  got %lld  (%s)\n", ok ? "ok  " : "FAIL", what, expected, got, source);
    return check_count_(ok);
}

static inline int check_true(const char *what, int cond, const char *detail)
{
    printf("%s %-52s %s\n", cond ? "ok  " : "FAIL", what, detail);
    return check_count_(cond);
}

/* A suite that ran no check fails: a setup that silently skipped every
 * case must not pass. */
static inline int check_done(const char *suite)
{
    printf("%s: %d passed, %d failed%s\n", suite, check_passed_, check_failed_,
           check_passed_ + check_failed_ ? "" : " (FAIL: no check ran)");
    return check_failed_ || !check_passed_ ? 1 : 0;
}

/* A precondition: stops the test (exit 1) with file:line and the message. */
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fputc('\n', stderr);                           \
            exit(1);                                       \
        }                                                  \
    } while (0)

static inline double check_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64*: a fixed, seedable generator. */
static inline uint64_t check_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

#endif

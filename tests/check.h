/* check: the assertions of megasim's C tests. Each prints the proof, the
 * expected value, the value got and where the expected number comes from,
 * and counts failures; check_done() prints the closing summary and gives
 * the exit status. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_failed_, check_passed_;

/* |got - expected| <= rel * |expected| (+ a tiny absolute floor). */
static inline int check_rel(const char *what, double expected, double got, double rel, const char *source)
{
    int ok = fabs(got - expected) <= rel * fabs(expected) + 1e-300;
    printf("%s %-52s expected %.6g  got %.6g  (rel tol %g; %s)\n", ok ? "ok  " : "FAIL", what, expected, got,
           rel, source);
    ok ? check_passed_++ : check_failed_++;
    return ok;
}

static inline int check_true(const char *what, int cond, const char *detail)
{
    printf("%s %-52s %s\n", cond ? "ok  " : "FAIL", what, detail);
    cond ? check_passed_++ : check_failed_++;
    return cond;
}

/* A suite that ran no check fails: a setup that silently skipped every
 * case must not pass. */
static inline int check_done(const char *suite)
{
    printf("%s: %d passed, %d failed%s\n", suite, check_passed_, check_failed_,
           check_passed_ + check_failed_ ? "" : " (FAIL: no check ran)");
    return check_failed_ || !check_passed_ ? 1 : 0;
}

#endif

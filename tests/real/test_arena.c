/* tests/real/test_arena.c: the rank's memory arena (real/arena.h): best
 * fit, reuse of freed gaps, alignment, the peak, and requests beyond the
 * plan served by the fallback allocator and counted as excess. Expected
 * values are worked out in the comments from ARENA_ALIGN = 256. */
#include "real/arena.h"

#include <stdio.h>
#include <stdlib.h>

static int failures;

static void expect(const char *what, long want, long got)
{
    int ok = want == got;
    failures += !ok;
    printf("%s %s: expected %ld, got %ld\n", ok ? "ok  " : "FAIL", what, want, got);
}

static int nsys;
static void *sys_alloc(void *ctx, size_t n) { nsys++; return malloc(n); }
static void sys_free(void *ctx, void *p) { nsys--; free(p); }

int main(void)
{
    static char base[4096];
    arena_t a;
    arena_init(&a, base, sizeof base, sys_alloc, sys_free, NULL);
    char *p1 = arena_alloc(&a, 100);  /* [0, 256) */
    char *p2 = arena_alloc(&a, 600);  /* 768 bytes: [256, 1024) */
    char *p3 = arena_alloc(&a, 256);  /* [1024, 1280) */
    expect("first block at the base", 0, p1 - base);
    expect("second block after the first, rounded to 256", 256, p2 - base);
    expect("third block", 1024, p3 - base);
    expect("bytes in use (256 + 768 + 256)", 1280, (long)a.in_use);
    arena_free(&a, p2);
    char *p4 = arena_alloc(&a, 512); /* the freed gap at 256, the smallest that holds it */
    expect("a freed gap is reused first", 256, p4 - base);
    char *big = arena_alloc(&a, 8192); /* beyond the 4096-byte plan */
    expect("a request beyond the plan is served by the fallback", 1, nsys);
    expect("peak counts it (256 + 512 + 256 + 8192)", 9216, (long)a.peak);
    expect("excess beyond the plan at its peak", 8192, (long)a.extra_peak);
    arena_free(&a, big);
    expect("the fallback allocation is returned", 0, nsys);
    arena_free(&a, p1), arena_free(&a, p3), arena_free(&a, p4);
    expect("nothing in use after freeing all", 0, (long)a.in_use);
    char *again = arena_alloc(&a, 4096);
    expect("the whole plan fits again at the base", 0, again - base);
    arena_reset(&a);
    expect("reset frees everything", 0, (long)a.in_use);
    /* Best fit: a 512-byte gap at 0 and a 256-byte one at 768; a small
     * request takes the small gap (first fit would split the large one). */
    char *q1 = arena_alloc(&a, 512), *q2 = arena_alloc(&a, 256), *q3 = arena_alloc(&a, 256);
    char *q4 = arena_alloc(&a, 256);
    arena_free(&a, q1), arena_free(&a, q3);
    char *q5 = arena_alloc(&a, 200);
    expect("a small request takes the smallest gap that holds it (768, not 0)", 768, q5 - base);
    char *q6 = arena_alloc(&a, 512);
    expect("the large gap is still whole for a large request", 0, q6 - base);
    expect("no fallback allocation", 0, nsys);
    (void)q2, (void)q4;
    arena_reset(&a);
    arena_destroy(&a);
    return failures ? 1 : 0;
}

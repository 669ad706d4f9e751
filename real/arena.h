/* real/arena.h: one rank's device memory, reserved once at the size the
 * memory model plans (model/workload.c) and handed out by best fit, so
 * the planned and the actually used peak can be laid side by side.
 * Device-agnostic: the runtime gives the base address and a fallback
 * allocator (malloc or cudaMalloc) for requests the plan did not foresee;
 * those are served, counted and reported as excess, never refused.
 *
 * Blocks are kept sorted by offset: alloc and free are O(blocks), a few
 * hundred per rank. Not thread-safe (one executor thread per rank). */
#ifndef REAL_ARENA_H
#define REAL_ARENA_H

#include <stddef.h>

#define ARENA_ALIGN 256

typedef struct {
    size_t off, bytes;
} arena_block_t;

typedef struct {
    char *base;                 /* reserved range [base, base + size) */
    size_t size;                /* planned bytes */
    arena_block_t *blocks;      /* live blocks, sorted by offset */
    int nblocks, capblocks;
    void **extra;               /* live fallback allocations */
    size_t *extra_bytes;
    int nextra, capextra;
    size_t in_use, peak;        /* bytes live now / at most (both kinds) */
    size_t extra_peak;          /* most bytes live beyond the plan at once */
    void *(*sys_alloc)(void *ctx, size_t bytes);
    void (*sys_free)(void *ctx, void *p);
    void *ctx;
} arena_t;

/* base may be NULL with size 0: every request then goes to sys_alloc. */
void arena_init(arena_t *a, void *base, size_t size, void *(*sys_alloc)(void *, size_t),
                void (*sys_free)(void *, void *), void *ctx);

/* NULL only when the fallback allocator fails too. */
void *arena_alloc(arena_t *a, size_t bytes);

/* p must come from arena_alloc of the same arena (NULL is ignored). */
void arena_free(arena_t *a, void *p);

/* Frees every block at once (the per-iteration transfer pool). */
void arena_reset(arena_t *a);

/* Releases the bookkeeping and the fallback allocations, not the base. */
void arena_destroy(arena_t *a);

#endif

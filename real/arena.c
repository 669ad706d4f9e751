/* real/arena.c: best-fit allocator over one reserved range (arena.h). */
#include "real/arena.h"

#include <stdlib.h>
#include <string.h>

void arena_init(arena_t *a, void *base, size_t size, void *(*sys_alloc)(void *, size_t),
                void (*sys_free)(void *, void *), void *ctx)
{
    memset(a, 0, sizeof *a);
    a->base = base, a->size = base ? size : 0;
    a->sys_alloc = sys_alloc, a->sys_free = sys_free, a->ctx = ctx;
}

static int grow(void **arr, int *cap, size_t elem)
{
    int n = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, (size_t)n * elem);
    if (!p)
        return -1;
    *arr = p, *cap = n;
    return 0;
}

static void account(arena_t *a, long delta)
{
    a->in_use += delta;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
}

static void *alloc_extra(arena_t *a, size_t bytes)
{
    if (a->nextra == a->capextra) {
        int cap = a->capextra;
        if (grow((void **)&a->extra, &cap, sizeof(void *)) || grow((void **)&a->extra_bytes, &a->capextra,
                                                                   sizeof(size_t)))
            return NULL;
    }
    void *p = a->sys_alloc(a->ctx, bytes);
    if (!p)
        return NULL;
    a->extra[a->nextra] = p, a->extra_bytes[a->nextra++] = bytes;
    size_t beyond = 0;
    for (int i = 0; i < a->nextra; i++)
        beyond += a->extra_bytes[i];
    if (beyond > a->extra_peak)
        a->extra_peak = beyond;
    account(a, (long)bytes);
    return p;
}

void *arena_alloc(arena_t *a, size_t bytes)
{
    bytes = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (bytes == 0)
        bytes = ARENA_ALIGN;
    /* Best fit: the smallest gap that holds it, the space after the last
     * block included, so the small transients of a layer's backward fill
     * holes rather than split the space a large one will want. */
    size_t at = 0, best_at = 0, best_gap = (size_t)-1;
    int i = 0, best_i = -1;
    for (; i <= a->nblocks; i++) {
        size_t end = i < a->nblocks ? a->blocks[i].off : a->size;
        size_t gap = end >= at ? end - at : 0;
        if (gap >= bytes && gap < best_gap)
            best_gap = gap, best_at = at, best_i = i;
        if (i < a->nblocks)
            at = a->blocks[i].off + a->blocks[i].bytes;
    }
    if (best_i < 0)
        return alloc_extra(a, bytes);
    at = best_at, i = best_i;
    if (a->nblocks == a->capblocks && grow((void **)&a->blocks, &a->capblocks, sizeof(arena_block_t)))
        return NULL;
    memmove(a->blocks + i + 1, a->blocks + i, (size_t)(a->nblocks - i) * sizeof(arena_block_t));
    a->blocks[i] = (arena_block_t){at, bytes};
    a->nblocks++;
    account(a, (long)bytes);
    return a->base + at;
}

void arena_free(arena_t *a, void *p)
{
    if (!p)
        return;
    char *c = p;
    if (a->base && c >= a->base && c < a->base + a->size) {
        size_t off = (size_t)(c - a->base);
        int lo = 0, hi = a->nblocks - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (a->blocks[mid].off == off) {
                account(a, -(long)a->blocks[mid].bytes);
                memmove(a->blocks + mid, a->blocks + mid + 1, (size_t)(a->nblocks - mid - 1) * sizeof(arena_block_t));
                a->nblocks--;
                return;
            }
            if (a->blocks[mid].off < off)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
        return;
    }
    for (int i = 0; i < a->nextra; i++)
        if (a->extra[i] == p) {
            account(a, -(long)a->extra_bytes[i]);
            a->sys_free(a->ctx, p);
            a->extra[i] = a->extra[--a->nextra];
            a->extra_bytes[i] = a->extra_bytes[a->nextra];
            return;
        }
}

void arena_reset(arena_t *a)
{
    for (int i = 0; i < a->nextra; i++)
        a->sys_free(a->ctx, a->extra[i]);
    a->nextra = 0, a->nblocks = 0, a->in_use = 0;
}

void arena_destroy(arena_t *a)
{
    arena_reset(a);
    free(a->blocks), free(a->extra), free(a->extra_bytes);
    a->blocks = NULL, a->extra = NULL, a->extra_bytes = NULL;
}

/* sim/meet.c: the rendezvous table (see meet.h). */
#include "sim/meet.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int grow(sim_meet_table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    sim_meet_t *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i].key) {
            size_t h = mix(t->slot[i].key) & (cap - 1);
            while (s[h].key)
                h = (h + 1) & (cap - 1);
            s[h] = t->slot[i];
        }
    free(t->slot);
    t->slot = s, t->cap = cap;
    return 0;
}

sim_meet_t *sim_meet_get(sim_meet_table *t, uint64_t key)
{
    if ((t->used + 1) * 2 > t->cap && grow(t))
        return NULL;
    size_t h = mix(key) & (t->cap - 1);
    while (t->slot[h].key && t->slot[h].key != key)
        h = (h + 1) & (t->cap - 1);
    if (!t->slot[h].key) {
        memset(&t->slot[h], 0, sizeof t->slot[h]);
        t->slot[h].key = key;
        t->used++;
    }
    return &t->slot[h];
}

sim_meet_t sim_meet_take(sim_meet_table *t, uint64_t key)
{
    size_t mask = t->cap - 1, i = mix(key) & mask, j;
    while (t->slot[i].key != key)
        i = (i + 1) & mask;
    sim_meet_t m = t->slot[i];
    /* Backward-shift deletion: move later members of the probe run into
     * the hole unless their home lies cyclically in (hole, their slot]. */
    t->slot[i].key = 0;
    t->used--;
    for (j = i;;) {
        j = (j + 1) & mask;
        if (!t->slot[j].key)
            return m;
        size_t home = mix(t->slot[j].key) & mask;
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            t->slot[i] = t->slot[j];
            t->slot[j].key = 0;
            i = j;
        }
    }
}

void sim_meet_free(sim_meet_table *t)
{
    free(t->slot);
    memset(t, 0, sizeof *t);
}

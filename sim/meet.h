/* sim/meet.h: the simulator's rendezvous table. A collective (or a TP
 * group's chunk step) is a meeting keyed by (group kind, group, sequence
 * number); members arrive one by one and the last starts the work. Open
 * addressing with linear probing and backward-shift deletion: O(1)
 * expected per operation, and slots move on deletion and growth, so hold
 * keys, never slot indices, across operations. */
#ifndef SIM_MEET_H
#define SIM_MEET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key;  /* 0 = empty slot */
    int arrived, need, stream;
    int64_t t_last;
    int64_t dur;   /* the longest member duration */
} sim_meet_t;

typedef struct {
    sim_meet_t *slot;
    size_t cap, used; /* cap is a power of two; used <= cap / 2 */
} sim_meet_table;

/* The meeting of `key`, inserted zeroed when new; NULL out of memory. The
 * pointer is valid until the next insertion or deletion. */
sim_meet_t *sim_meet_get(sim_meet_table *t, uint64_t key);

/* Removes the meeting of `key` (which must be present) and returns a copy. */
sim_meet_t sim_meet_take(sim_meet_table *t, uint64_t key);

void sim_meet_free(sim_meet_table *t);

#endif

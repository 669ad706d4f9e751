/* sim/engine_setup.c: building a simulation and handing its result over
 * (engine.h, engine_int.h): parsing straggler lists, the classes of
 * identical DP replicas (folding), the entities with their slow-rank and
 * slow-link factors, the chunk prices (model/cost.h), the traced ranks;
 * then the result's per-entity accounts, and the teardown. The event loop
 * itself is in engine.c. */
#include "sim/engine_int.h"

#include "model/cost.h"
#include "model/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double factor_of(const sim_slow_t *list, int n, int id)
{
    double f = 1;
    for (int i = 0; i < n; i++)
        if (list[i].id == id && list[i].factor > f)
            f = list[i].factor;
    return f;
}

static double rank_factor(const sim_t *S, int rank) { return factor_of(S->opts->slow_ranks, S->opts->nslow_ranks, rank); }
static double node_factor(const sim_t *S, int rank)
{
    return factor_of(S->opts->slow_links, S->opts->nslow_links, rank / S->hw->cluster.gpus_per_node);
}

int sim_parse_slow(const char *text, const char *flag, int limit, sim_slow_t *list, int *n, char *err, int len)
{
    *n = 0;
    const char *p = text;
    while (p && *p) {
        int id, used = 0;
        double f;
        if (sscanf(p, "%d:%lf%n", &id, &f, &used) != 2 || (p[used] && p[used] != ',')) {
            snprintf(err, len, "--%s '%s': expected ID:FACTOR[,ID:FACTOR...] (e.g. 17:1.1)", flag, text);
            return -1;
        }
        if (id < 0 || id >= limit || !(f >= 1) || f > 1000) {
            snprintf(err, len, "--%s %d:%g: the id must be 0 to %d and the factor 1 to 1000", flag, id, f, limit - 1);
            return -1;
        }
        if (*n == SIM_MAX_SLOW) {
            snprintf(err, len, "--%s: more than %d entries", flag, SIM_MAX_SLOW);
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (list[i].id == id) {
                snprintf(err, len, "--%s: id %d is listed twice; allowed: each id once", flag, id);
                return -1;
            }
        if (p[used] == ',' && !p[used + 1]) {
            snprintf(err, len, "--%s '%s': ends with a comma; expected ID:FACTOR[,ID:FACTOR...]", flag, text);
            return -1;
        }
        list[(*n)++] = (sim_slow_t){id, f};
        p += used + (p[used] == ',');
    }
    return 0;
}

/* A DP replica is "dirty" when one of its ranks, or a node it uses, is slow. */
static int replica_dirty(const sim_t *S, int d)
{
    const job_t *j = S->job;
    for (int s = 0; s < j->pp; s++)
        for (int t = 0; t < j->tp; t++) {
            int r = layout_rank(layout_of(j), t, d, s);
            if (rank_factor(S, r) > 1 || node_factor(S, r) > 1)
                return 1;
        }
    return 0;
}

static int setup_classes(sim_t *S)
{
    const job_t *j = S->job;
    S->cls_rep = malloc(sizeof(int) * j->dp_cp);
    S->cls_count = malloc(sizeof(int) * j->dp_cp);
    if (!S->cls_rep || !S->cls_count)
        return -1;
    S->classes = 0;
    if (!S->opts->fold) {
        for (int d = 0; d < j->dp_cp; d++)
            S->cls_rep[S->classes] = d, S->cls_count[S->classes++] = 1;
        return 0;
    }
    int clean = -1, nclean = 0;
    for (int d = 0; d < j->dp_cp; d++) {
        if (replica_dirty(S, d)) {
            S->cls_rep[S->classes] = d, S->cls_count[S->classes++] = 1;
        } else {
            if (clean < 0)
                clean = S->classes++, S->cls_rep[clean] = d;
            nclean++;
        }
    }
    if (clean >= 0)
        S->cls_count[clean] = nclean;
    return 0;
}

/* The slowest factor over the TP ranks an entity stands for. */
static void entity_factors(sim_t *S, entity_t *e)
{
    const job_t *j = S->job;
    e->factor = e->link_factor = 1;
    for (int tt = S->E_tp > 1 ? e->tp_i : 0; tt < (S->E_tp > 1 ? e->tp_i + 1 : j->tp); tt++) {
        int r = layout_rank(layout_of(j), tt, S->cls_rep[e->cls], e->stage);
        e->factor = fmax(e->factor, rank_factor(S, r));
        e->link_factor = fmax(e->link_factor, node_factor(S, r));
    }
    e->factor *= hw_host_share(S->hw); /* ranks time-sharing cores: every one's compute, as a straggler's */
}

/* The stages' programs written out (S->prog, S->prog_n). */
static void free_programs(sim_t *S)
{
    for (int s = 0; S->prog && s < S->p; s++)
        free(S->prog[s]);
    free(S->prog), free(S->prog_n);
    S->prog = NULL, S->prog_n = NULL;
}

/* Every entity of a stage plays the same program (model/sched.c), so
 * the stages' programs are written out once and the entities hold a
 * position in them: a few hundred ops a stage, read from cache by all of
 * its ranks, where each rank's own iterator would recompute them and carry
 * 1.4 kB of state. Programs above PROGRAMS_BYTES that would also take more
 * memory than the iterators (a huge batch on a few entities) are not
 * written out: the writing stops there and each entity iterates, as it
 * does when the options say so. 0, or -1 out of memory. */
#define PROGRAMS_BYTES (16.0 * 1048576)
static int setup_programs(sim_t *S)
{
    const job_t *j = S->job;
    double room_b = fmax(S->ne * (double)sizeof(sched_iter_t), PROGRAMS_BYTES), used_b = 0;
    int fits = !S->opts->own_iterators;
    if (fits && (!(S->prog = calloc(S->p, sizeof *S->prog)) || !(S->prog_n = calloc(S->p, sizeof *S->prog_n))))
        return free_programs(S), -1;
    for (int s = 0; fits && s < S->p; s++) {
        sched_iter_t it;
        sched_op_t op;
        long cap = 0;
        sched_iter_init(&it, j, s);
        while (fits && sched_next(&it, &op)) {
            if ((used_b += sizeof op) > room_b) {
                fits = 0;
                break;
            }
            if (S->prog_n[s] == cap) {
                sched_op_t *g = realloc(S->prog[s], sizeof op * (size_t)(cap = cap ? 2 * cap : 256));
                if (!g)
                    return free_programs(S), -1;
                S->prog[s] = g;
            }
            S->prog[s][S->prog_n[s]++] = op;
        }
    }
    if (fits)
        return 0;
    free_programs(S);
    if (!(S->its = malloc(sizeof *S->its * S->ne)))
        return -1;
    for (int i = 0; i < S->ne; i++)
        sched_iter_init(S->e[i].it = &S->its[i], j, S->e[i].stage);
    return 0;
}

int eng_setup(sim_t *S)
{
    const job_t *j = S->job;
    S->p = j->pp, S->v = j->vpp;
    S->E_tp = S->opts->fold ? 1 : j->tp;
    if (setup_classes(S))
        return -1;
    S->ne = S->classes * S->p * S->E_tp;
    S->e = calloc(S->ne, sizeof *S->e);
    S->ct = malloc(sizeof *S->ct * S->p * S->v);
    S->dp_link = malloc(sizeof(double) * S->p * S->E_tp);
    S->mem = malloc(sizeof(int) * (S->ne > S->classes + S->E_tp + 2 ? S->ne : S->classes + S->E_tp + 2));
    if (!S->e || !S->ct || !S->dp_link || !S->mem || sim_heap_init(&S->heap, 1024))
        return -1;
    for (int s = 0; s < S->p; s++)
        for (int c = 0; c < S->v; c++)
            cost_chunk_times(j, S->hw, s, c, &S->ct[s * S->v + c]);
    group_layout_t pp = cost_group_layout(j, S->hw, GROUP_PP);
    S->p2p_ns = ns(cost_p2p_s(S->hw, layer_p2p_bytes(j), &pp));
    S->sync_gap_ns = ns(S->hw->cluster.host_sync_gap_us * 1e-6);
    S->overhead_ns = ns(S->hw->cluster.iteration_overhead_s);
    if (S->opts->network == SIM_NET_FLOWS && eng_net_setup(S))
        return -2;
    for (int s = 0; s < S->p; s++)
        for (int t = 0; t < S->E_tp; t++) { /* a ring runs at its slowest NIC */
            double f = 1;
            for (int d = 0; d < j->dp_cp; d++)
                for (int tt = S->E_tp > 1 ? t : 0; tt < (S->E_tp > 1 ? t + 1 : j->tp); tt++)
                    f = fmax(f, node_factor(S, layout_rank(layout_of(j), tt, d, s)));
            S->dp_link[s * S->E_tp + t] = f;
        }
    for (int c = 0; c < S->classes; c++)
        for (int s = 0; s < S->p; s++)
            for (int t = 0; t < S->E_tp; t++) {
                entity_t *e = &S->e[ent_id(S, c, s, t)];
                e->cls = c, e->stage = s, e->tp_i = t;
                entity_factors(S, e);
            }
    if (setup_programs(S))
        return -1;
    /* A traced rank is recorded by the entity that stands for it: same
     * stage, its replica's class, its TP rank when TP is unfolded. */
    for (int k = 0; k < S->opts->ntrace; k++) {
        int r = S->opts->trace_ranks[k], c = 0;
        layout_pos_t at = layout_pos(layout_of(j), r);
        int d = at.dp_i, s = at.stage;
        while (c < S->classes && S->cls_rep[c] != d && !(S->cls_count[c] > 1 && !replica_dirty(S, d)))
            c++;
        S->trace_ent[k] = -1;
        if (c < S->classes && s < S->p) {
            S->trace_ent[k] = ent_id(S, c, s, S->E_tp > 1 ? at.tp_i : 0);
            S->e[S->trace_ent[k]].traced = 1;
        }
    }
    return 0;
}

void eng_teardown(sim_t *S)
{
    for (int i = 0; S->e && i < S->ne; i++) {
        for (int st = 0; st < STREAM_COUNT; st++)
            free(S->e[i].q[st].s), free(S->e[i].q[st].waiting), free(S->e[i].q[st].free_idx);
        for (int d = 0; d < 4; d++)
            free(S->e[i].pend[d / 2][d % 2].slot), free(S->e[i].pend[d / 2][d % 2].stream);
        for (op_block_t *b = S->e[i].blocks, *next; b; b = next)
            next = b->next, free(b);
    }
    sim_heap_node *q; /* events still queued: a run stopped early (the clock's end, a deadlock) */
    while ((q = sim_heap_pop(&S->heap))) {
        event_t *ev = SIM_HEAP_ENTRY(q, event_t, node);
        if (ev != &S->net_ev)
            free(ev);
    }
    while (S->free_ev) {
        event_t *n = S->free_ev->next_free;
        free(S->free_ev);
        S->free_ev = n;
    }
    sim_heap_free(&S->heap);
    sim_meet_free(&S->meets);
    if (S->net)
        sim_net_free(S->net);
    free(S->fj);
    free_programs(S);
    free(S->its);
    free(S->e), free(S->ct), free(S->dp_link), free(S->mem), free(S->cls_rep), free(S->cls_count);
    if (S->tl_failed_handover)
        free(S->tl);
}

int eng_collect(const sim_t *S, result_t *r, char *err, int len)
{
    r->entities = S->ne, r->classes = S->classes, r->events = S->events;
    r->per_entity = malloc(sizeof *r->per_entity * S->ne);
    r->entity_rank = malloc(sizeof(int) * S->ne);
    r->entity_count = malloc(sizeof(int) * S->ne);
    if (!r->per_entity || !r->entity_rank || !r->entity_count) {
        snprintf(err, len, "out of memory for results");
        return -1;
    }
    for (int i = 0; i < S->ne; i++) {
        const entity_t *e = &S->e[i];
        r->per_entity[i] = e->acc;
        r->entity_rank[i] = global_rank(S, e);
        r->entity_count[i] = S->cls_count[e->cls] * (S->E_tp > 1 ? 1 : S->job->tp);
        if (e->acc.end > r->iteration_ns)
            r->iteration_ns = e->acc.end, r->critical_entity = i;
    }
    r->critical = r->per_entity[r->critical_entity];
    r->timeline = S->tl, r->ntimeline = S->ntl; /* handed over */
    if (S->net)
        eng_net_contention(S, r);
    return 0;
}

/* Unfolded, every rank holds its own state: about 3.3 KiB a rank
 * (131,072 ranks 426 MB, 2026-11-29; 6.5 KiB before the ranks shared
 * their stage's program), counted as 8 KiB, since its queues grow with the
 * ops in flight. 1, with a message, when that would not fit in three
 * quarters of this machine's memory. */
#define UNFOLDED_BYTES_PER_RANK 8192.0
int eng_unfolded_too_big(const job_t *job, char *err, int len)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double need_b = UNFOLDED_BYTES_PER_RANK * job->num_gpus, have_b = pages > 0 && page > 0 ? (double)pages * page : 0;
    if (!(have_b > 0 && need_b > 0.75 * have_b))
        return 0;
    snprintf(err, len, "simulating all %d ranks one by one needs about %.0f GiB; this machine has %.0f GiB "
             "(allowed: up to %.0f ranks here; fold identical ranks, the default without --network flows, or "
             "simulate fewer GPUs)", job->num_gpus, need_b / 1073741824.0, have_b / 1073741824.0,
             0.75 * have_b / UNFOLDED_BYTES_PER_RANK);
    return 1;
}

/* real/health_diag: the wait-for graph of a hung job from its heartbeats
 * (health.h). A rank inside a communication call waits on the peers that
 * have not yet entered the matching call: for a collective, the members of
 * its group whose count of collectives on that group is below the call's
 * number; for a transfer, the peer whose count of transfers the other way
 * (same tag) is below it. A rank in no call waits on nobody: if others
 * wait on it, directly or through others, it is a culprit (stuck in its
 * own work, or hung); so is a rank that died or failed. */
#include "real/health.h"

#include "real/comm.h"
#include "model/sched.h"

#include <stdio.h>
#include <string.h>

static const char *const grp_names[] = {"tp", "dp", "pp", "emb", "world", "cp", "ep", "edp", "etp"};
_Static_assert(sizeof grp_names / sizeof grp_names[0] == HB_GROUPS, "a name for every comm.h group");
static const char *const tag_names[] = {"fwd", "bwd", "ring"};
static const char *const op_names[] = {"fwd", "bwd", "xfer", "dp_gather", "dp_reduce", "emb_sync", "optim",
                                       "host", "join"};

const char *health_grp_name(int grp) { return grp >= 0 && grp < HB_GROUPS ? grp_names[grp] : "?"; }
const char *health_op_name(int kind)
{
    return kind >= 0 && kind < (int)(sizeof op_names / sizeof op_names[0]) ? op_names[kind] : "?";
}

/* With experts, h's place in its stage's TP x CP x DP ranks folded as
 * ETP x EP x EDP (comm_groups_init): at[0 .. 3) = etp_i, ep_i, edp_i. */
static void fold(const hb_record_t *h, long long at[3])
{
    long long local = h->tp_i + (long long)h->tp * h->dp_i, etp = h->etp > 0 ? h->etp : 1;
    at[0] = local % etp, at[1] = local / etp % h->ep, at[2] = local / (etp * h->ep);
}

/* Whether b is in a's group grp (both records of one job); no EP or EDP
 * group without experts (ep 0). */
static int same_group(const hb_record_t *a, const hb_record_t *b, int grp)
{
    long long fa[3], fb[3];
    int other = grp == GRP_EP ? 2 : 1; /* EP: the same edp_i; EDP: the same ep_i */
    switch (grp) {
    case GRP_TP: return a->dp_i == b->dp_i && a->stage == b->stage;
    case GRP_DP: return a->tp_i == b->tp_i && a->stage == b->stage;
    case GRP_PP: return a->tp_i == b->tp_i && a->dp_i == b->dp_i;
    case GRP_EMB: return a->tp_i == b->tp_i && a->dp_i == b->dp_i && (b->stage == 0 || b->stage == b->pp - 1);
    case GRP_CP: /* one sequence's ranks: the same data replica, dp_i / cp */
        return a->tp_i == b->tp_i && a->stage == b->stage && a->dp_i / (a->cp > 0 ? a->cp : 1) == b->dp_i / (b->cp > 0 ? b->cp : 1);
    case GRP_EP:
    case GRP_EDP:
    case GRP_ETP:
        if (a->ep <= 0 || b->ep <= 0 || a->stage != b->stage)
            return 0;
        fold(a, fa), fold(b, fb);
        if (grp == GRP_ETP) /* the same ep_i and edp_i */
            return fa[1] == fb[1] && fa[2] == fb[2];
        return fa[0] == fb[0] && fa[other] == fb[other];
    default: return 1;
    }
}

/* Transfers b has entered with peer a, tag, in direction recv. */
static int64_t p2p_count(const hb_record_t *b, int a, int tag, int recv)
{
    for (int i = 0; i < b->np2p && i < HB_MAX_P2P; i++)
        if (b->p2p[i].peer == a && b->p2p[i].tag == tag && b->p2p[i].recv == recv)
            return b->p2p[i].n;
    return 0;
}

static void add_wait(hb_wait_t *w, int on, const char *why)
{
    for (int i = 0; i < w->nwait; i++)
        if (w->on[i] == on)
            return;
    if (w->nwait < HB_MAX_WAIT) {
        snprintf(w->why[w->nwait], sizeof w->why[0], "%s", why);
        w->on[w->nwait++] = on;
    }
}

/* a's edges. Calls match in order (collectives per group, transfers per
 * peer, tag and direction), so a rank that has entered more calls of a
 * kind than a peer has entered of the matching kind waits on that peer:
 * whether it is still inside the call or already past an asynchronous
 * issue and blocked where it waits for the result (a stream's sync). */
static void edges(const hb_record_t *rec, int world, int r, hb_wait_t *w)
{
    const hb_record_t *a = &rec[r];
    char why[96];
    for (int g = 0; g < HB_GROUPS; g++) {
        if (!a->coll[g])
            continue;
        snprintf(why, sizeof why, "collective %lld on %s", (long long)a->coll[g], health_grp_name(g));
        for (int m = 0; m < world; m++)
            if (m != r && same_group(a, &rec[m], g) && rec[m].coll[g] < a->coll[g])
                add_wait(w, m, why);
    }
    for (int i = 0; i < a->np2p && i < HB_MAX_P2P; i++) {
        const hb_p2p_t *t = &a->p2p[i];
        if (t->peer < 0 || t->peer >= world || t->peer == r)
            continue;
        const char *tag = t->tag >= 0 && t->tag < 3 ? tag_names[t->tag] : "?";
        snprintf(why, sizeof why, "%s %lld (tag %s) %s rank %d", t->recv ? "receive" : "send", (long long)t->n, tag,
                 t->recv ? "from" : "to", t->peer);
        if (p2p_count(&rec[t->peer], r, t->tag, !t->recv) < t->n)
            add_wait(w, t->peer, why);
    }
}

int health_waitfor(const hb_record_t *rec, int world, int64_t now_ns, hb_wait_t *w, int *chain, int *nchain)
{
    int waited[4096] = {0}, reach[4096] = {0};
    if (world > 4096)
        world = 4096;
    for (int r = 0; r < world; r++) {
        memset(&w[r], 0, sizeof w[r]);
        w[r].rank = r;
        double gap_s = (now_ns - rec[r].beat_ns) * 1e-9;
        w[r].dead = rec[r].state == HB_RUNNING && gap_s > 3 * (rec[r].interval_s > 0 ? rec[r].interval_s : 1);
        if (rec[r].state == HB_RUNNING)
            edges(rec, world, r, &w[r]);
        for (int i = 0; i < w[r].nwait; i++)
            waited[w[r].on[i]] = 1;
    }
    /* Ranks reached from a waiting rank by wait edges. */
    for (int r = 0; r < world; r++)
        if (w[r].nwait)
            reach[r] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < world; r++)
            for (int i = 0; reach[r] && i < w[r].nwait; i++)
                if (!reach[w[r].on[i]])
                    reach[w[r].on[i]] = changed = 1;
    }
    int n = 0;
    for (int r = 0; r < world; r++) {
        w[r].culprit = rec[r].state == HB_FAILED || w[r].dead ||
                       (reach[r] && waited[r] && !w[r].nwait && rec[r].state == HB_RUNNING);
        n += w[r].culprit;
    }
    /* The longest chain: from each waiting rank nobody waits on, follow
     * the first edge (no rank twice) to where it stops. */
    *nchain = 0;
    for (int s = 0; s < world; s++) {
        if (!w[s].nwait || waited[s])
            continue;
        int path[4096], len = 0, seen[4096] = {0};
        for (int r = s; r >= 0 && !seen[r] && len < world; r = w[r].nwait ? w[r].on[0] : -1)
            seen[r] = 1, path[len++] = r;
        if (len > *nchain) {
            memcpy(chain, path, sizeof(int) * len);
            *nchain = len;
        }
    }
    return n;
}

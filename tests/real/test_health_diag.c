/* tests/real/test_health_diag.c: the wait-for graph (real/health_diag.c)
 * on the experts' groups, from records built by hand, and the reader's
 * message for a heartbeat of another format (real/health.c).
 *
 * The world: 8 ranks, TP 2 x DP 2 x PP 2 (CP 1): rank = tp_i + 2 (dp_i +
 * 2 stage). With EP 2 and ETP 1 a stage's 4 ranks (local = rank mod 4)
 * fold as etp_i = 0, ep_i = local mod 2, edp_i = local / 2
 * (comm_groups_init), so the EP groups are {0,1} {2,3} {4,5} {6,7} and the
 * EDP groups {0,2} {1,3} {4,6} {5,7}. With ETP 2: etp_i = local mod 2,
 * ep_i = local / 2, edp_i = 0: EP groups {0,2} {1,3} {4,6} {5,7}, ETP
 * groups (the same ep_i and edp_i) {0,1} {2,3} {4,5} {6,7}. */
#include "real/comm.h"
#include "real/health.h"
#include "tests/check.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WORLD 8

static hb_record_t rec[WORLD];
static hb_wait_t w[WORLD];

/* Every rank running, alive now, in no call. */
static void make_world(int ep, int etp)
{
    memset(rec, 0, sizeof rec);
    for (int r = 0; r < WORLD; r++) {
        hb_record_t *h = &rec[r];
        h->rank = r, h->world = WORLD, h->tp = 2, h->dp = 2, h->pp = 2, h->cp = 1, h->ep = ep, h->etp = etp;
        h->tp_i = r % 2, h->dp_i = r / 2 % 2, h->stage = r / 4;
        h->state = HB_RUNNING, h->beat_ns = 1000000000, h->interval_s = 1;
    }
}

/* Rank r inside its first collective on grp. */
static void enter_first(int r, int grp)
{
    rec[r].coll[grp] = 1;
    rec[r].pending[0] = (hb_pending_t){HB_COLL, (int8_t)grp, 0, -1, 1};
    rec[r].npending = 1;
}

/* The graph; checks that r waits on `on` alone, for `why`, and that `on`
 * is the one culprit. */
static void expect_waits(const char *what, int r, int on, const char *why)
{
    int chain[WORLD], nchain = 0, total = 0;
    int culprits = health_waitfor(rec, WORLD, rec[0].beat_ns, w, chain, &nchain);
    for (int m = 0; m < WORLD; m++)
        total += w[m].nwait;
    char name[96], detail[160];
    snprintf(name, sizeof name, "%s: waits in the world", what);
    check_eq(name, 1, total, "one rank in a call, one partner behind");
    snprintf(name, sizeof name, "%s: rank %d waits on", what, r);
    check_eq(name, on, w[r].nwait ? w[r].on[0] : -1, "its group's member that entered no call");
    snprintf(name, sizeof name, "%s: for", what);
    snprintf(detail, sizeof detail, "expected \"%s\", got \"%s\"", why, w[r].nwait ? w[r].why[0] : "");
    check_true(name, w[r].nwait && !strcmp(w[r].why[0], why), detail);
    snprintf(name, sizeof name, "%s: culprits", what);
    check_eq(name, 1, culprits, "the partner, waited on and waiting on nobody");
    snprintf(name, sizeof name, "%s: rank %d is the culprit", what, on);
    check_eq(name, 1, w[on].culprit, "as above");
}

static void test_groups(void)
{
    make_world(2, 1);
    enter_first(2, GRP_EP); /* EP group {2,3}: not 0 or 1 (other edp_i), nor 6, 7 (stage 1) */
    expect_waits("EP 2 ETP 1, EP", 2, 3, "collective 1 on ep");

    make_world(2, 1);
    enter_first(5, GRP_EDP); /* EDP group {5,7} on stage 1 */
    expect_waits("EP 2 ETP 1, EDP", 5, 7, "collective 1 on edp");

    make_world(2, 2);
    enter_first(0, GRP_EP); /* with ETP 2 rank 0's EP partner is 2, not 1 */
    expect_waits("EP 2 ETP 2, EP", 0, 2, "collective 1 on ep");

    make_world(2, 2);
    enter_first(6, GRP_ETP); /* the ETP group {6,7}: the rows of an expert's two slices */
    expect_waits("EP 2 ETP 2, ETP", 6, 7, "collective 1 on etp");

    /* Without experts there is no EP group: a count on it (which a run
     * never makes) is nobody's business. */
    make_world(0, 1);
    enter_first(2, GRP_EP);
    int chain[WORLD], nchain = 0, total = 0;
    int culprits = health_waitfor(rec, WORLD, rec[0].beat_ns, w, chain, &nchain);
    for (int m = 0; m < WORLD; m++)
        total += w[m].nwait;
    check_eq("EP 0: waits in the world", 0, total, "no EP group without experts");
    check_eq("EP 0: culprits", 0, culprits, "nobody waits");
}

/* A file of n bytes starting with magic; health_read's error. */
static void read_error(const char *magic, size_t n, char *err, int errlen)
{
    char path[] = "/tmp/megasim-hb-XXXXXX";
    static char buf[sizeof(hb_record_t) + 64];
    int fd = mkstemp(path);
    CHECK(fd >= 0, "cannot make a temporary file");
    memset(buf, 0, sizeof buf);
    memcpy(buf, magic, 8);
    CHECK(n <= sizeof buf && write(fd, buf, n) == (ssize_t)n, "cannot write %s", path);
    close(fd);
    hb_record_t out;
    err[0] = 0;
    check_eq(magic, -1, health_read(path, &out, err, errlen), "a record this megasim does not read");
    unlink(path);
}

static void test_old_format(void)
{
    char err[1400];
    /* MSHB0002's record: 6 group counters, no EP or ETP: 32 bytes shorter than MSHB0004's 9 */
    read_error("MSHB0002", sizeof(hb_record_t) - 32, err, sizeof err);
    check_true("MSHB0002 (its size): names the format", strstr(err, "a heartbeat file of format MSHB0002") != NULL, err);
    read_error("MSHB0002", sizeof(hb_record_t), err, sizeof err);
    check_true("MSHB0002 (its magic): names the format", strstr(err, "format MSHB0002") != NULL, err);
    /* MSHB0003's: 8 group counters, no ETP group's: 8 bytes shorter */
    read_error("MSHB0003", sizeof(hb_record_t) - 8, err, sizeof err);
    check_true("MSHB0003 (its size): names the format", strstr(err, "a heartbeat file of format MSHB0003") != NULL, err);
    read_error("NOTAHBXX", sizeof(hb_record_t), err, sizeof err);
    check_true("junk: not a heartbeat file", strstr(err, "not a megasim heartbeat file (its magic)") != NULL, err);
}

int main(void)
{
    test_groups();
    test_old_format();
    return check_done("test_health_diag");
}

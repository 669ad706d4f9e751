/* cmd/reproduce_bounds.c: Table 2 against itself (reproduce.h). Shapes
 * of the iteration time fitted by least squares (calib_fit_params) to the
 * paper's own Table 2 rows: what the best model of each shape could reach
 * there, and whether a shape fitted to one of the table's two global
 * batches carries to the other. Diagnostics for the calibration protocol
 * (experiments/megascale/ASSUMPTIONS.md), which forbids fitting Table 2:
 * none of it feeds a prediction. */
#include "cmd/reproduce.h"

#include "calib/fit.h"

#include <math.h>
#include <stdio.h>

/* Table 2 against itself: for each system, a model of the iteration time
 * fitted by least squares on MFU directly to that system's Table 2 rows; a
 * diagnostic, not a prediction (the protocol forbids fitting Table 2).
 * - flat: T = m C + O (m micro-batches per pipeline, a time C per
 *   micro-batch, a fixed O per iteration). Any model whose C and O are the
 *   same on every row of a system is of this form, so its residuals bound
 *   what such a model can reach on Table 2.
 * - slow hosts: T = m C (1 + s P) + O, P = 1 - (1 - q)^nodes the chance
 *   that the job holds at least one slow host at the paper's rate q = 0.5%
 *   (section 6), which then stretches every micro-batch by s. It is the
 *   shape of a cost that grows with the node count and saturates; the fit
 *   says how large s must be, against the paper's own stragglers (about 10%
 *   longer forward passes, a third of a micro-batch's compute). */
#define SLOW_HOST_RATE 0.005

static const char *const sys[2] = {"Megatron-LM", "MegaScale"}; /* row_t.system */

/* Both shapes' parameters (C s, O s, s): starting points and bounds. */
static const double p0[3] = {0.2, 1, 0.05}, lo[3] = {1e-4, -100, -1}, hi[3] = {100, 100, 10};

typedef struct {
    const row_t *r[NSETS * 16];
    int n, slow_hosts;
} bound_ctx_t;

static double bound_model(const double *p, int i, void *ctx)
{
    const bound_ctx_t *c = ctx;
    const row_t *r = c->r[i];
    double stretch = 1;
    if (c->slow_hosts) {
        double nodes = (double)r->job.num_gpus / r->hw.cluster.gpus_per_node;
        stretch += p[2] * (1 - pow(1 - SLOW_HOST_RATE, nodes));
    }
    return 100 * r->paper_mfu * r->paper_iter_s / (r->job.num_microbatches * p[0] * stretch + p[1]);
}

static void print_bound(const row_t *rows, int n)
{
    int header = 0;
    for (int s = 0; s < 2; s++) {
        bound_ctx_t c = {.n = 0};
        double target[NSETS * 16];
        for (int i = 0; i < n && c.n < NSETS * 16; i++)
            if (rows[i].set == SET_TABLE2 && rows[i].system == s && isfinite(rows[i].paper_iter_s))
                target[c.n] = 100 * rows[i].paper_mfu, c.r[c.n++] = &rows[i];
        for (c.slow_hosts = 0; c.slow_hosts < 2; c.slow_hosts++) {
            int np = c.slow_hosts ? 3 : 2;
            double res[NSETS * 16];
            calib_fit_t f = calib_fit_params(bound_model, &c, target, c.n, np, p0, lo, hi, res);
            if (c.n <= np + 1 || !f.ok)
                continue;
            double worst = 0;
            for (int i = 0; i < c.n; i++)
                worst = fmax(worst, fabs(res[i]));
            if (!header++)
                printf("\nTable 2 against itself (bounds, not predictions): each system's iteration time fitted to its "
                       "own rows;\nflat: T = m C + O, the best any model with one C and one O per system can do;\n"
                       "slow hosts: T = m C (1 + s P) + O, P = 1 - %g^nodes (a cost that grows with the node count):\n",
                       1 - SLOW_HOST_RATE);
            printf("  %-11s %-10s C = %.4f s per micro-batch, O = %.2f s", sys[s], c.slow_hosts ? "slow hosts" : "flat",
                   f.p[0], f.p[1]);
            if (c.slow_hosts)
                printf(", s = %.3f +- %.3f", f.p[2], f.se[2]);
            printf(": mean |error| %.2f, max %.2f points (%d rows)\n", f.mean_abs, worst, c.n);
        }
    }
}

/* Table 2's two global batches against each other (a diagnostic): each
 * shape above fitted to one batch's rows and evaluated on the other's.
 * Whether a term that grows with the node count, fitted where the paper
 * measured, would carry to the rows it did not see. */
static void print_cross(const row_t *rows, int n)
{
    int header = 0;
    for (int s = 0; s < 2; s++) {
        bound_ctx_t g[2] = {{.n = 0}, {.n = 0}};
        double target[2][NSETS * 16];
        int batch[2] = {-1, -1};
        for (int i = 0; i < n; i++) {
            const row_t *r = &rows[i];
            if (r->set != SET_TABLE2 || r->system != s || !isfinite(r->paper_iter_s))
                continue;
            int k = batch[0] < 0 || batch[0] == r->batch ? 0 : batch[1] < 0 || batch[1] == r->batch ? 1 : -1;
            if (k < 0 || g[k].n == NSETS * 16)
                continue; /* a third batch: not this diagnostic's */
            batch[k] = r->batch, target[k][g[k].n] = 100 * r->paper_mfu, g[k].r[g[k].n++] = r;
        }
        for (int slow = 0; slow < 2; slow++)
            for (int a = 0; a < 2; a++) {
                bound_ctx_t *fit = &g[a], *test = &g[1 - a];
                int np = slow ? 3 : 2;
                fit->slow_hosts = test->slow_hosts = slow;
                if (fit->n <= np || test->n == 0)
                    continue;
                calib_fit_t f = calib_fit_params(bound_model, fit, target[a], fit->n, np, p0, lo, hi, NULL);
                if (!f.ok)
                    continue;
                double sum = 0, worst = 0;
                for (int i = 0; i < test->n; i++) {
                    double e = fabs(bound_model(f.p, i, test) - target[1 - a][i]);
                    sum += e, worst = fmax(worst, e);
                }
                if (!header++)
                    printf("\nTable 2 across its batches (a diagnostic, not a prediction): each shape fitted to one "
                           "global batch's rows, evaluated on the other's:\n");
                printf("  %-11s %-10s fitted at batch %d (%d rows", sys[s], slow ? "slow hosts" : "flat", batch[a],
                       fit->n);
                if (slow)
                    printf(", s = %.3f", f.p[2]);
                printf("), at batch %d: mean |error| %.2f, max %.2f points\n", batch[1 - a], sum / test->n, worst);
            }
    }
}

void reproduce_print_bounds(const row_t *rows, int n)
{
    print_bound(rows, n);
    print_cross(rows, n);
}

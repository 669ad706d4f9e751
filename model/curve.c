/* curve: log-x linear interpolation of efficiency curves (see curve.h). */
#include "model/curve.h"

#include <math.h>
#include <stdio.h>

double curve_eval(const curve_t *c, double x)
{
    if (c->n <= 1 || x <= c->x[0])
        return c->y[0];
    if (x >= c->x[c->n - 1])
        return c->y[c->n - 1];
    int i = 1;
    while (c->x[i] < x)
        i++;
    double lx = log10(x), l0 = log10(c->x[i - 1]), l1 = log10(c->x[i]);
    double w = (lx - l0) / (l1 - l0);
    return c->y[i - 1] + w * (c->y[i] - c->y[i - 1]);
}

int curve_check(const curve_t *c, double ylo, double yhi, const char *name,
                char *err, int errlen)
{
    if (c->n < 1 || c->n > CURVE_MAX) {
        snprintf(err, errlen, "%s: %d points; allowed 1 to %d", name, c->n, CURVE_MAX);
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        if (!(c->x[i] > 0) || (i > 0 && !(c->x[i] > c->x[i - 1]))) {
            snprintf(err, errlen, "%s: point %d has x = %g; x must be > 0 and strictly increasing",
                     name, i, c->x[i]);
            return -1;
        }
        if (!(c->y[i] >= ylo && c->y[i] <= yhi)) {
            snprintf(err, errlen, "%s: point %d has y = %g; allowed %g to %g",
                     name, i, c->y[i], ylo, yhi);
            return -1;
        }
    }
    return 0;
}

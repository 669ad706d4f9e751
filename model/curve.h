/* curve: an efficiency curve y(x) given as up to CURVE_MAX points, read
 * with linear interpolation in log10(x) and clamped at both ends. Hardware
 * profiles hold their efficiency curves this way (GEMM efficiency by FLOPs,
 * memory-bound efficiency by bytes, collective bandwidth by size) so that
 * calibration can replace them without touching code. */
#ifndef MODEL_CURVE_H
#define MODEL_CURVE_H

#define CURVE_MAX 24

typedef struct {
    int n;               /* number of points, 1..CURVE_MAX */
    double x[CURVE_MAX]; /* strictly increasing, > 0 */
    double y[CURVE_MAX];
} curve_t;

/* Value at x; a curve of one point is a constant. O(n). */
double curve_eval(const curve_t *c, double x);

/* 0 when the points are well formed (1..CURVE_MAX points, x > 0 and
 * strictly increasing, y within [ylo, yhi]); else -1 with a message. */
int curve_check(const curve_t *c, double ylo, double yhi, const char *name,
                char *err, int errlen);

#endif

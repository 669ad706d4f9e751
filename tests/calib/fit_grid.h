/* tests/calib/fit_grid.h: the GEMM shapes the GPU calibration times, for
 * the fit tests (test_fit.c, test_fit_all.c) to make synthetic samples of. */
#ifndef TESTS_CALIB_FIT_GRID_H
#define TESTS_CALIB_FIT_GRID_H

/* The GPU calibration's full grid of linear-layer GEMMs (calib/bench_gpu.c):
 * a GPT block's four linear layers (C -> OC) for h 2048 at TP 1, 2, 4, 8 and
 * h 12288 at TP 8 over N tokens, each as {m, n, k, pass, tp, h}: the forward
 * (N, OC, C), dinp (N, C, OC) and dweight (OC, C, N). Returns the count, 60. */
#define LINEAR_GRID 60
static inline int linear_grid(double N, double g[LINEAR_GRID][6])
{
    static const int cfg[][2] = {{2048, 1}, {2048, 2}, {2048, 4}, {2048, 8}, {12288, 8}};
    int cnt = 0;
    for (int c = 0; c < 5; c++) {
        double h = cfg[c][0], tp = cfg[c][1];
        double lin[4][2] = {{h, 3 * h / tp}, {h / tp, h}, {h, 4 * h / tp}, {4 * h / tp, h}}; /* C, OC */
        for (int l = 0; l < 4; l++)
            for (int pass = 0; pass < 3; pass++) {
                double C = lin[l][0], OC = lin[l][1];
                double *r = g[cnt++];
                r[0] = pass == 2 ? OC : N, r[1] = pass == 0 ? OC : C, r[2] = pass == 0 ? C : pass == 1 ? OC : N;
                r[3] = pass, r[4] = tp, r[5] = h;
            }
    }
    return cnt;
}

#endif

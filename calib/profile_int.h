/* calib/profile_int: what the fits' files share (profile.c, the fits and
 * the profile; profile_attn.c, the attention's fits); not for callers
 * outside calib/profile*.c. */
#ifndef CALIB_PROFILE_INT_H
#define CALIB_PROFILE_INT_H

#include "calib/profile.h"

/* A new fit record of n samples (zeroed, owned by r). */
calib_fitrec_t *calib_new_fit(calib_result_t *r, const char *name, const char *xn, const char *yn, int n);
/* The fit record of that name, or NULL. */
const calib_fitrec_t *calib_find_fit(const calib_result_t *r, const char *name);
/* y = b x by least squares through the origin (gsl_fit_mul) over f's
 * samples: lin.b, its standard error, R^2, rms and the residuals; lin.ok
 * with at least 2 samples. */
void calib_fit_through_origin(calib_fitrec_t *f);
/* A profile holding only what the memory-bound fits give (fit_hbm and
 * fit_memory_bound have run); one static copy, rewritten by each call. */
const hw_t *calib_mem_profile(const calib_result_t *r);
/* The fields by which the model prices a GEMM, as calib_make_profile
 * writes them: the SMs (a CPU's cores), the tile (a CPU's 4 x 4; a GPU's
 * the gemm_eff fit chose, when it did) and the gemm_eff curve. */
void calib_gemm_fields(const calib_result_t *r, hw_gpu_t *g);
/* The attention fits, after fit_gemm (profile_attn.c). */
void calib_fit_attention(calib_result_t *r);

#endif

/* kernels/attnmerge_ref.c: fp32 reference of the log-sum-exp merge of two
 * attention outputs (see attnmerge.h). */
#include "kernels/attnmerge.h"

void kern_attnmerge_ref(float *out, float *lse, const float *out_b, const float *lse_b, int B, int T, int NH,
                        int HS) {
  for (long b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (long t = 0; t < T; t++) {
        long r = (b * NH + h) * T + t;
        float w, wb, L;
        if (!kern_attnmerge_weights(lse[r], lse_b[r], &w, &wb, &L)) continue;
        float *o = out + ((b * T + t) * NH + h) * HS;
        const float *ob = out_b + ((b * T + t) * NH + h) * HS;
        for (int i = 0; i < HS; i++) o[i] = w * o[i] + wb * ob[i];
        lse[r] = L;
      }
}

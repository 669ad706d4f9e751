/* kernels/embedding_ref.c: fp32 reference of the token + position
 * embedding. O(B T C) time, no extra memory. */
#include "kernels/embedding.h"

void kern_embedding_fwd_ref(float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C) {
  for (long bt = 0; bt < (long)B * T; bt++) {
    const float *te = wte + (long)tokens[bt] * C, *pe = wpe ? wpe + (bt % T) * C : NULL;
    float *o = out + bt * C;
    for (int c = 0; c < C; c++) o[c] = te[c] + (pe ? pe[c] : 0.0f);
  }
}

void kern_embedding_bwd_ref(float *dwte, float *dwpe, const float *dout,
                            const int *tokens, int B, int T, int C) {
  for (long bt = 0; bt < (long)B * T; bt++) {
    float *dte = dwte + (long)tokens[bt] * C, *dpe = dwpe ? dwpe + (bt % T) * C : NULL;
    const float *d = dout + bt * C;
    for (int c = 0; c < C; c++) {
      dte[c] += d[c];
      if (dpe) dpe[c] += d[c];
    }
  }
}

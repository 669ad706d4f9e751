/* kernels/embedding_ref.c: fp32 reference of the token + position
 * embedding, whole or one slice of the vocabulary. O(B T C) time, no extra
 * memory. */
#include "kernels/embedding.h"

/* Row of the token in the slice [v0, v0 + V), or NULL outside it. */
static const float *row(const float *w, int tok, int v0, int V, int C) {
  return tok >= v0 && tok < v0 + V ? w + (long)(tok - v0) * C : NULL;
}

void kern_embedding_fwd_ref(float *out, const int *tokens, const float *wte,
                            const float *wpe, int v0, int V, int B, int T, int C) {
  for (long bt = 0; bt < (long)B * T; bt++) {
    const float *te = row(wte, tokens[bt], v0, V, C), *pe = wpe ? wpe + (bt % T) * C : NULL;
    float *o = out + bt * C;
    for (int c = 0; c < C; c++) o[c] = (te ? te[c] : 0.0f) + (pe ? pe[c] : 0.0f);
  }
}

void kern_embedding_bwd_ref(float *dwte, float *dwpe, const float *dout,
                            const int *tokens, int v0, int V, int B, int T, int C) {
  for (long bt = 0; bt < (long)B * T; bt++) {
    float *dte = (float *)row(dwte, tokens[bt], v0, V, C), *dpe = dwpe ? dwpe + (bt % T) * C : NULL;
    const float *d = dout + bt * C;
    for (int c = 0; c < C; c++) {
      if (dte) dte[c] += d[c];
      if (dpe) dpe[c] += d[c];
    }
  }
}

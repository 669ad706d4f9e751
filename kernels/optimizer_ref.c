/* kernels/optimizer_ref.c: fp32 reference AdamW and LAMB over a list of
 * tensors. LAMB makes two passes per tensor (moments and norms, then the
 * update), the same split as the kernel. */
#include <math.h>
#include <stdlib.h>
#include "kernels/optimizer.h"

static void bias_corrections(kern_opt_hparams hp, float *bc1, float *bc2) {
  *bc1 = 1.0f - powf(hp.beta1, (float)hp.step);
  *bc2 = 1.0f - powf(hp.beta2, (float)hp.step);
}

static void store(const kern_opt_tensor *t, long i, float w) {
  t->param[i] = w;
  if (t->param_bf16) t->param_bf16[i] = kern_float_to_bf16(w);
}

void kern_grad_sumsq_ref(const kern_opt_tensor *ts, int count, float *sums) {
  for (int k = 0; k < count; k++) {
    double s = 0.0;
    for (long i = 0; i < ts[k].n; i++) s += (double)ts[k].grad[i] * ts[k].grad[i];
    sums[k] = (float)s;
  }
}

void kern_adamw_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp) {
  float bc1, bc2;
  bias_corrections(hp, &bc1, &bc2);
  for (int k = 0; k < count; k++) {
    const kern_opt_tensor *t = &ts[k];
    for (long i = 0; i < t->n; i++) {
      float u = kern_adam_dir(t->param[i], t->grad[i], &t->m[i], &t->v[i], hp, bc1, bc2);
      store(t, i, t->param[i] - hp.lr * u);
    }
  }
}

void kern_lamb_norms_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms) {
  float bc1, bc2;
  bias_corrections(hp, &bc1, &bc2);
  for (int k = 0; k < count; k++) {
    const kern_opt_tensor *t = &ts[k];
    double w2 = 0.0, u2 = 0.0;
    for (long i = 0; i < t->n; i++) {
      float u = kern_adam_dir(t->param[i], t->grad[i], &t->m[i], &t->v[i], hp, bc1, bc2);
      w2 += (double)t->param[i] * t->param[i];
      u2 += (double)u * u;
    }
    norms[2 * k] = (float)w2;
    norms[2 * k + 1] = (float)u2;
  }
}

void kern_lamb_apply_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, const float *norms) {
  float bc1, bc2;
  bias_corrections(hp, &bc1, &bc2);
  for (int k = 0; k < count; k++) {
    const kern_opt_tensor *t = &ts[k];
    float r = kern_lamb_ratio(norms[2 * k], norms[2 * k + 1]);
    for (long i = 0; i < t->n; i++) {
      float u = kern_adam_dir_nomove(t->param[i], t->m[i], t->v[i], hp, bc1, bc2);
      store(t, i, t->param[i] - hp.lr * r * u);
    }
  }
}

void kern_lamb_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp) {
  float stack[64], *norms = count <= 32 ? stack : malloc(sizeof(float) * 2 * (size_t)count);
  if (!norms) return; /* out of host memory: nothing is updated */
  kern_lamb_norms_ref(ts, count, hp, norms);
  kern_lamb_apply_ref(ts, count, hp, norms);
  if (norms != stack) free(norms);
}

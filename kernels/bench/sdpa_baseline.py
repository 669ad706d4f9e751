#!/usr/bin/env python3
"""kernels/bench/sdpa_baseline.py: PyTorch scaled_dot_product_attention
forward + backward at kern_bench's attention shapes, on its flash backend
(FlashAttention-2: issue 38's bar, rows sdpa_flash_*) and on its cuDNN
backend (cuDNN's fused attention, what Transformer Engine runs on Hopper:
rows sdpa_cudnn_*, for issue 38's choice between our kernels and cuDNN),
printed in kern_bench's columns (the same shape strings) so that they can
be read side by side. kern_bench's sliding-window shape has no row here: SDPA takes a
window only as an explicit mask, which rules the flash backend out. GQA runs
with enable_gqa (torch >= 2.5); an older torch, or a backend that refuses
a shape (or is not built), gets a '#' line saying so instead of a row.
FLOPs: 4 B H D x (visible query-key pairs) forward, 2.5x that backward."""
import sys
import torch
import torch.nn.functional as F

SHAPES = [  # (label, B, T, query heads, key/value heads, D): causal, as kern_bench
    ("175B/TP8", 1, 2048, 12, 12, 128),
    ("1.3B", 1, 2048, 16, 16, 128),
    ("GQA 4", 1, 4096, 16, 4, 128),
    ("70B/TP8 GQA 8", 1, 4096, 8, 1, 128),
    ("1.3B B4", 4, 2048, 16, 16, 128),
]


# The backends timed: (torch's, our row name; None where this torch has no
# such backend: a '#' line instead of rows). Both causal at head size 128.
BACKENDS = [(getattr(torch.nn.attention.SDPBackend, name, None), kind)
            for name, kind in (("FLASH_ATTENTION", "flash"), ("CUDNN_ATTENTION", "cudnn"))]


def time_us(fn, iters=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return 1e3 * start.elapsed_time(end) / iters


def main():
    if not torch.cuda.is_available():
        print("sdpa_baseline: no GPU")
        return 77
    print(f"# torch {torch.__version__} SDPA (flash and cuDNN backends; cuDNN {torch.backends.cudnn.version()}) on "
          f"{torch.cuda.get_device_name()}")
    print(f"{'# kernel':<26} {'shape':<34} {'time_us':>10} {'TFLOP/s':>10}")
    for label, B, T, H, HKV, D in SHAPES:
        q = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(B, HKV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2))
        dout = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
        fwd_flops = 4.0 * B * H * D * T * (T + 1) / 2
        shape = f"B{B} T{T} H{H}/{HKV} D{D} w0 {label}"
        gqa = {"enable_gqa": True} if HKV != H else {}
        for backend, kind in BACKENDS:
            timed(backend, kind, shape, q, k, v, dout, gqa, fwd_flops)
    return 0


def timed(backend, kind, shape, q, k, v, dout, gqa, fwd_flops):
    """Rows sdpa_KIND_fwd and sdpa_KIND_fwdbwd on one SDPA backend, or a '#'
    line when it refuses the shape."""
    if backend is None:
        print(f"# {shape}: this torch has no SDPA {kind} backend; no row")
        return
    with torch.nn.attention.sdpa_kernel(backend):
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

        try:
            fwd()
        except (TypeError, RuntimeError) as e:
            print(f"# {shape}: SDPA {kind} refused it ({str(e).splitlines()[0][:100]}); no row")
            return

        def fwdbwd():
            fwd().backward(dout)

        for name, fn, fl in ((f"sdpa_{kind}_fwd", fwd, fwd_flops),
                             (f"sdpa_{kind}_fwdbwd", fwdbwd, 3.5 * fwd_flops)):
            us = time_us(fn)
            print(f"{name:<26} {shape:<34} {us:10.1f} {fl / us * 1e-6:10.1f}")


if __name__ == "__main__":
    sys.exit(main())

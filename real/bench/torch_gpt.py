#!/usr/bin/env python3
"""real/bench/torch_gpt.py: the PyTorch eager baseline of `megasim run
--device gpu`: the same GPT, the same batch, the same FLOPs formula.

Model (as real/gpt.c): GPT-2 style, learned position embedding, pre-LN
blocks (LayerNorm eps 1e-5), bias in every Linear and LayerNorm, tanh GeLU,
MLP 4h (or --ffn-hidden-size), a final LayerNorm, output layer tied to the
token embedding (no bias), causal attention through
torch.nn.functional.scaled_dot_product_attention, mean cross-entropy over
the global batch, AdamW. Dropout where Megatron-LM (and megasim) puts it,
at the same defaults (0.1): the embedding output and each branch before
its residual add (--hidden-dropout), the attention probabilities inside
SDPA (--attention-dropout); 0 turns each off. Gradients clipped to a global
norm of --clip-grad (1.0, megasim's and Megatron-LM's default) inside the
timed step, as megasim's optimizer step does. Mixed precision as megasim's GPU path keeps it:
fp32 master weights, gradients and moments, bf16 matmuls (torch.autocast),
or --precision bf16 for weights stored in bf16 (no master copy).

One step = the global batch as global/micro micro-batches, gradients
accumulated, then one optimizer step; timed with CUDA events around the
whole step (batch upload included, as megasim's host stall op includes
it). MFU uses Megatron's model FLOPs per iteration (Narayanan et al.,
SC'21, without recomputation):
    F = 72 B s l h^2 (1 + s / (6 h) + V / (12 l h)),  B = global batch
against --peak-tflops (H100 SXM dense bf16: 989.4 TFLOP/s).

Output: one JSON object per line on stdout, per step
    {"step", "loss", "step_time_s", "tokens_per_s", "tflops", "mfu"}
(the keys of `megasim run --json`), then one {"summary": true, ...} line.
Progress and the configuration go to stderr. Needs torch only for a run;
--help works without it."""
import argparse
import json
import math
import statistics
import sys
import time

H100_SXM_BF16_PEAK_TFLOPS = 989.4


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch eager GPT training baseline for megasim run --device gpu (one GPU).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("model (Megatron-LM flag names, as megasim)")
    m.add_argument("--num-layers", type=int, default=24, help="transformer layers l")
    m.add_argument("--hidden-size", type=int, default=2048, help="hidden size h")
    m.add_argument("--ffn-hidden-size", type=int, default=0, help="MLP hidden size (0 = 4 h)")
    m.add_argument("--num-attention-heads", type=int, default=16, help="attention heads")
    m.add_argument("--seq-length", type=int, default=2048, help="sequence length s (tokens)")
    m.add_argument("--padded-vocab-size", type=int, default=256, help="vocabulary V (byte-level: 256)")
    m.add_argument("--hidden-dropout", type=float, default=0.1,
                   help="dropout of the embedding output and before each residual add (megasim's default)")
    m.add_argument("--attention-dropout", type=float, default=0.1,
                   help="dropout on the attention probabilities (megasim's default)")
    b = p.add_argument_group("batch and training")
    b.add_argument("--micro-batch-size", type=int, default=4, help="sequences per micro-batch")
    b.add_argument("--global-batch-size", type=int, default=16, help="sequences per step B")
    b.add_argument("--train-iters", type=int, default=20, help="steps to run")
    b.add_argument("--warmup-steps", type=int, default=3, help="first steps left out of the summary")
    b.add_argument("--lr", type=float, default=0.002, help="AdamW learning rate (megasim run's default)")
    b.add_argument("--adam-beta1", type=float, default=0.9)
    b.add_argument("--adam-beta2", type=float, default=0.95)
    b.add_argument("--adam-eps", type=float, default=1e-8)
    b.add_argument("--weight-decay", type=float, default=0.01)
    b.add_argument("--clip-grad", type=float, default=1.0,
                   help="clip gradients to this global L2 norm, as megasim run and Megatron-LM (0: no clipping)")
    b.add_argument("--seed", type=int, default=1234)
    b.add_argument("--data", default="", help="file of bytes (one token per byte); empty: uniform random tokens")
    r = p.add_argument_group("implementation")
    r.add_argument("--precision", choices=["amp", "bf16"], default="amp",
                   help="amp: fp32 weights + bf16 autocast (megasim's scheme); bf16: weights stored in bf16")
    r.add_argument("--adamw", choices=["fused", "foreach", "loop"], default="fused",
                   help="torch.optim.AdamW implementation")
    r.add_argument("--peak-tflops", type=float, default=H100_SXM_BF16_PEAK_TFLOPS,
                   help="peak dense bf16 TFLOP/s of the GPU, for MFU")
    a = p.parse_args(argv)
    if a.global_batch_size % a.micro_batch_size or a.hidden_size % a.num_attention_heads:
        p.error("--global-batch-size must be a multiple of --micro-batch-size, --hidden-size of the heads")
    if not (0 <= a.hidden_dropout < 1 and 0 <= a.attention_dropout < 1):
        p.error("--hidden-dropout and --attention-dropout must lie in [0, 1)")
    return a


def flops_per_iter(B, s, l, h, V):
    """Megatron's model FLOPs of one iteration (no recomputation)."""
    return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h))


def gpt_classes(torch):
    """The model's modules, defined once torch is imported."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, h, nh, ffn, hdrop, adrop):
            super().__init__()
            self.nh, self.hdrop, self.adrop = nh, hdrop, adrop
            self.ln1, self.ln2 = nn.LayerNorm(h, eps=1e-5), nn.LayerNorm(h, eps=1e-5)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

        def attention(self, x):  # x (B, T, C) -> (B, T, C)
            B, T, C = x.shape
            q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.adrop if self.training else 0.0)  # (B, NH, T, HS)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

        def forward(self, x):
            x = x + F.dropout(self.attention(self.ln1(x)), self.hdrop, self.training)
            return x + F.dropout(self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), self.hdrop, self.training)

    class GPT(nn.Module):
        def __init__(self, a):
            super().__init__()
            h, ffn = a.hidden_size, a.ffn_hidden_size or 4 * a.hidden_size
            self.wte = nn.Embedding(a.padded_vocab_size, h)
            self.wpe = nn.Embedding(a.seq_length, h)
            self.hdrop = a.hidden_dropout
            self.blocks = nn.ModuleList(Block(h, a.num_attention_heads, ffn, a.hidden_dropout, a.attention_dropout)
                                        for _ in range(a.num_layers))
            self.ln_f = nn.LayerNorm(h, eps=1e-5)
            self.init_weights(a.num_layers)

        def init_weights(self, L):
            """GPT-2's: N(0, 0.02), the residual outputs / sqrt(2 L); LayerNorm
            weights 1 (the only 1-D weights), biases 0."""
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    (nn.init.ones_ if name.endswith("weight") else nn.init.zeros_)(p)
                else:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, targets):  # idx, targets (B, T) -> mean loss
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = F.dropout(self.wte(idx) + self.wpe(pos), self.hdrop, self.training)
            for blk in self.blocks:
                x = blk(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output layer (B, T, V)
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT


class Batches:
    """Host batches (m, B, T + 1) of int64 tokens: windows of --data, or
    uniform random tokens, drawn from a seeded generator."""

    def __init__(self, torch, a):
        self.torch, self.a = torch, a
        self.gen = torch.Generator().manual_seed(a.seed)
        self.m = a.global_batch_size // a.micro_batch_size
        self.bytes = None
        if a.data:
            with open(a.data, "rb") as f:
                self.bytes = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
            if self.bytes.numel() < a.seq_length + 2:
                raise SystemExit(f"torch_gpt: {a.data} holds fewer than seq_length + 2 bytes")

    def next(self):
        t, a = self.torch, self.a
        shape = (self.m, a.micro_batch_size)
        if self.bytes is None:
            return t.randint(0, a.padded_vocab_size, shape + (a.seq_length + 1,), generator=self.gen).pin_memory()
        starts = t.randint(0, self.bytes.numel() - a.seq_length - 1, shape, generator=self.gen)
        offs = starts.unsqueeze(-1) + t.arange(a.seq_length + 1)
        return self.bytes[offs].pin_memory()


def make_optimizer(torch, model, a):
    kind = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[a.adamw]
    return torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_eps,
                             weight_decay=a.weight_decay, **kind)


def train_step(torch, model, opt, host_batch, a):
    """One global batch; returns the mean loss and the gradient norm
    (before clipping) as device tensors."""
    toks = host_batch.to("cuda", non_blocking=True)
    m = toks.shape[0]
    loss_sum = torch.zeros((), device="cuda")
    for k in range(m):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "amp"):
            loss = model(toks[k, :, :-1], toks[k, :, 1:]) / m
        loss.backward()
        loss_sum += loss.detach()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad if a.clip_grad > 0 else float("inf"),
                                          foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss_sum, norm


def step_record(step, loss, t_s, a, flops):
    tokens = a.global_batch_size * a.seq_length
    return {"step": step, "loss": loss, "step_time_s": t_s, "tokens_per_s": tokens / t_s,
            "tflops": flops / t_s * 1e-12, "mfu": flops / (t_s * a.peak_tflops * 1e12)}


def summary(torch, recs, a, flops, nparams):
    kept = [r["step_time_s"] for r in recs[a.warmup_steps:]] or [r["step_time_s"] for r in recs]
    med, mean = statistics.median(kept), statistics.fmean(kept)
    return {"summary": True, "system": "pytorch-eager", "torch": torch.__version__,
            "device_name": torch.cuda.get_device_name(), "precision": a.precision, "adamw": a.adamw,
            "hidden_dropout": a.hidden_dropout, "attention_dropout": a.attention_dropout, "clip_grad": a.clip_grad,
            "params": nparams, "flops_per_iter": flops, "steps_kept": len(kept),
            "median_step_time_s": med, "mean_step_time_s": mean,
            "tokens_per_s": a.global_batch_size * a.seq_length / med, "tflops": flops / med * 1e-12,
            "mfu": flops / (med * a.peak_tflops * 1e12), "peak_tflops": a.peak_tflops,
            "final_loss": recs[-1]["loss"], "max_memory_allocated_bytes": torch.cuda.max_memory_allocated()}


def run(torch, a):
    torch.manual_seed(a.seed)
    with torch.device("cuda"):  # built and initialised on the GPU
        model = gpt_classes(torch)(a)
    if a.precision == "bf16":
        model = model.to(torch.bfloat16)
    opt, data = make_optimizer(torch, model, a), Batches(torch, a)
    nparams = sum(p.numel() for p in model.parameters())
    flops = flops_per_iter(a.global_batch_size, a.seq_length, a.num_layers, a.hidden_size, a.padded_vocab_size)
    print(f"torch_gpt: {nparams:,} parameters, {flops:.4g} FLOPs per step, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, {a.precision}, AdamW {a.adamw}, dropout {a.hidden_dropout} (hidden) "
          f"{a.attention_dropout} (attention)", file=sys.stderr)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    recs = []
    for step in range(1, a.train_iters + 1):
        batch = data.next()
        torch.cuda.synchronize()
        start.record()
        loss, norm = train_step(torch, model, opt, batch, a)
        end.record()
        end.synchronize()
        rec = step_record(step, loss.item(), start.elapsed_time(end) * 1e-3, a, flops)
        rec["grad_norm"] = norm.item()
        recs.append(rec)
        print(json.dumps(rec), flush=True)
        print(f"step {step:4d} | loss {rec['loss']:.4f} | {rec['step_time_s'] * 1e3:9.2f} ms | "
              f"MFU {100 * rec['mfu']:6.2f}%", file=sys.stderr, flush=True)
    print(json.dumps(summary(torch, recs, a, flops, nparams)), flush=True)
    return 0


def main(argv=None):
    a = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch_gpt: PyTorch is not installed (pip install torch)", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_gpt: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 3
    t0 = time.time()
    rc = run(torch, a)
    print(f"torch_gpt: done in {time.time() - t0:.1f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""check_predict_ops: `megasim predict --ops` lists one layer's ops as the
cost model prices them: a collective named by its kind and its group, a
repeated op's amount over all its runs, and an MoE job's dense and MoE
layers each in a section of their own.

Expected values, and where they come from:
- CP 16 (p2p) runs 1/16 of the layer's causal attention on each rank
  (Megatron-Core's load-balanced chunks), as 16 causal blocks of s / 16
  queries: 16 c (c + 1) / 2 query-key pairs, c = s / 16, against CP 1's
  s (s + 1) / 2; the attention's GFLOP, all 16 runs, is CP 1's times
  (c + 1) / (s + 1).
- The ring passes K and V CP - 1 = 15 times: 'send-recv cp ... (15 runs)'.
- The allgather dispatcher gathers over ETP x EP (Megatron-Core's tp_ep
  group): 'all-gather etp_ep'.
- DeepSeek-V3's 3 dense layers first: a dense section and an MoE section;
  Mixtral (every layer MoE): the MoE section only."""
import re, subprocess, sys

megasim = sys.argv[1]
models = sys.argv[2]
fail = 0


def check(ok, what):
    global fail
    print(("ok  " if ok else "FAIL"), what)
    fail += not ok


def sections(args):
    """{title: {op name: (shape, amount)}} of predict --ops."""
    out = subprocess.run([megasim, "predict", "--ops"] + args, capture_output=True, text=True, check=True).stdout
    got, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"one (.*layer, \w+), per micro-batch per GPU:", line)
        if m:
            cur = got.setdefault(m.group(1), {})
            continue
        if cur is None or not line.startswith("  ") or line.split()[0] in ("op", "total"):
            continue
        name, shape, amount = line[2:18].strip(), line[25:65].strip(), float(line[65:78])
        cur[name] = (shape, amount)
    return got


llama = [models + "/llama3-405b.json", "--num-gpus", "16384", "--seq-length", "131072", "--global-batch-size", "2048"]
cp1 = sections(llama + ["--context-parallel-size", "1"])["layer, forward"]
cp16 = sections(llama + ["--context-parallel-size", "16"])["layer, forward"]
s = 131072
want = cp1["attn"][1] * (s / 16 + 1) / (s + 1)
check(abs(cp16["attn"][1] - want) <= 1e-3,
      "CP 16 attention GFLOP (all 16 runs): expected %.3f (CP 1's %.3f x (s/16 + 1) / (s + 1)) got %.3f"
      % (want, cp1["attn"][1], cp16["attn"][1]))
shape = cp16.get("cp_ring_kv", ("", 0))[0]
check(shape.startswith("send-recv cp") and shape.endswith("(15 runs)"),
      "CP ring: expected 'send-recv cp, async (15 runs)' got %r" % shape)

mix = sections([models + "/mixtral-8x7b.json", "--expert-model-parallel-size", "1"])
check("MoE layer, forward" in mix and all(t.startswith("MoE ") for t in mix),
      "Mixtral: MoE sections only: got %s" % sorted(mix))
shape = mix.get("MoE layer, forward", {}).get("ep_ag_tokens", ("", 0))[0]
check(shape.startswith("all-gather etp_ep"), "Mixtral's token gather: expected 'all-gather etp_ep, ...' got %r" % shape)

ds = sections([models + "/deepseek-v3-gqa.json"])
check("dense layer, forward" in ds and "MoE layer, forward" in ds,
      "DeepSeek-V3: a dense and an MoE section: got %s" % sorted(ds))

# A GPT-style GeLU, fused (--fused-elementwise) or not, is one pass over the
# (T, f/t) activation: read the pre-activation and write the output forward
# (2 x T f/t x 2 bytes), read the gradient and the pre-activation and write
# the input gradient backward (3 x), as megasim's run does it (its fused
# bias-GeLU kernel; model/layer.c). An H200 measured cuBLASLt's GeLU
# epilogues at about that too, where 1 x each way had been priced.
gpt = ["--preset", "none", "--num-layers", "2", "--hidden-size", "2048", "--ffn-hidden-size", "8192",
       "--num-attention-heads", "16", "--seq-length", "2048", "--micro-batch-size", "4", "--global-batch-size", "4",
       "--num-gpus", "1", "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1",
       "--num-layers-per-virtual-pipeline-stage", "0"]
f_mb = 4 * 2048 * 8192 * 2 / 1e6  # T x f bf16, MB
for fused in ([], ["--fused-elementwise"]):
    ops = sections(gpt + fused)
    fwd, bwd = ops["layer, forward"].get("gelu", ("", 0))[1], ops["layer, backward"].get("gelu_bwd", ("", 0))[1]
    check(abs(fwd - 2 * f_mb) < 1e-3 and abs(bwd - 3 * f_mb) < 1e-3,
          "GeLU%s: expected %.3f MB forward and %.3f backward (2 and 3 x T f bf16) got %.3f and %.3f"
          % (" fused" if fused else "", 2 * f_mb, 3 * f_mb, fwd, bwd))

print("check_predict_ops: %s" % ("FAIL" if fail else "ok"))
sys.exit(1 if fail else 0)

#!/usr/bin/env python3
"""experiments/moe-mfu/make-rows.py: writes one job file per published MoE
MFU figure on H100s (experiments/moe-mfu/*.json), each the model file of
experiments/models/ plus the published plan, so that `megasim predict
experiments/moe-mfu/ROW.json` predicts the run and
tests/model/check_moe_mfu.py sets it beside the published figure.

The figures and their sources (every number below is copied from them; the
paper's tables were read from a stored text copy of the PDF and checked
against its prose: 49.3, 39.0, 41.6 and 28.8%, 43.7 to 41.5%, 47.6 to 42.9%,
and Table 2's TFLOP/s against Table 3):
- MoE Parallel Folding (Liu et al., NVIDIA, arXiv 2504.14960v2, section 6.4):
  Table 3 (GBS 256, seq 4096, BF16, the best plan per method), Table 4 (the
  same plans at GBS 1024, 64 to 1,024 GPUs), Table 5 (Mixtral 8x22B at
  16K-128K tokens, 16M tokens a batch), Table 2 (Mixtral 8x22B in FP8,
  TFLOP/s a GPU). Eos: DGX H100 nodes, NVLink 450 GB/s and InfiniBand 400
  Gb/s a GPU (section 4.1). Benchmarks drop tokens at capacity factor 1
  (section 4.2). MFU = model TFLOP/s a GPU / 989.5 (Table 2: 487.7 TFLOP/s
  is Table 3's 49.3%).
- Megatron-Core's MoE README (github.com/NVIDIA/Megatron-LM,
  megatron/core/transformer/moe/README.md, commit 022bcb5): "468 TFLOPS for
  Mixtral 8X7B bf16 training" (MCore v0.9) and, under "Reference Best
  Parallel Mapping", Mixtral 8x7B dropless on 64 H100s, TP 1 EP 8 PP 4 VP 8,
  MBS 1, GBS 256, seq 4096, all-to-all. That the figure was measured on
  that mapping is our reading: the README does not say so.

Rows left out: the paper's FSDP, FSDP + EP and TP + EP + DP baselines
(other frameworks' schedules), Table 5's MCore rows (CP > 1 without folding:
EP strided over CP x TP, a placement megasim does not build; its EP always
folds into TP x CP x DP), Table 5's Qwen2 rows (the Mixtral rows' numbers
and plans again; the text gives 38.7% and 35.9% for Qwen2 without plans),
and Table 4's Llama3-8x70B folding row at 256 GPUs (absent from the copy).

Megatron-LM's FLOP count of the time (attention over all s keys) is
megasim's within 0.09% (the router's 2 h E): MFU needs no conversion.

Not given by the sources, and assumed the same for every row (chosen before
any prediction, from the MoE README's "Performance Best Practice", written
by the paper's authors; the first version left out the overlapped p2p,
added after the first run to follow the README: it raises the rows 1.4 to
11 points, Mixtral 8x22B's 5, docs/benchmarks.md): micro-batch 1 and one
layer per virtual pipeline stage (the reference mappings' VP equals the
layers per stage), the distributed optimizer with --overlap-grad-reduce and
--overlap-param-gather, --tp-comm-overlap when TP > 1, the interleaved
schedule's overlapped p2p (megasim's --pp-comm-overlap) when PP > 1,
sequence parallelism, the all-to-all dispatcher, grouped GEMM, permute
fusion, flash attention, no recomputation; FP8 rows: --fp8-format hybrid
(the delayed recipe the paper names); even expert loads
(--moe-expert-load-cv 0). Cluster: the built-in fattree (a DGX SuperPOD)
at 400 Gb/s a NIC.

usage: python3 experiments/moe-mfu/make-rows.py [--check]
(rewrites the rows; --check only compares them with the files, exit 1 if
any differs: the test model_moe_mfu_rows)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")
PAPER = "MoE Parallel Folding (Liu et al., arXiv 2504.14960v2)"
README = "Megatron-Core MoE README (NVIDIA/Megatron-LM, megatron/core/transformer/moe/README.md at 022bcb5)"
PEAK = 989.5  # the paper's BF16 peak, TFLOP/s a GPU (section 4.1)

# model key: (model file, display name)
MODEL = {
    "mixtral-8x22b": ("mixtral-8x22b.json", "Mixtral 8x22B"),
    "qwen2-57b-a14b": ("qwen2-57b-a14b.json", "Qwen2-57B-A14B"),
    "g8t8": ("mixtral-8x22b-g8t8.json", "Mixtral-8x22B-G8T8"),
    "llama3-8x70b": ("llama3-8x70b.json", "Llama3-8x70B"),
    "mixtral-8x7b": ("mixtral-8x7b.json", "Mixtral 8x7B"),
}

# Each plan from Table 3 (GPUs, CP, TP, EP, PP, ETP; ETP blank = TP's, the
# MCore rows; the folding row of Llama3-8x70B leaves ETP blank too, and EP 8
# over DP 2 is possible only folded: ETP 1 assumed).
PLAN = {
    ("mixtral-8x22b", "mcore"): dict(cp=1, tp=2, ep=4, pp=8, etp=None),
    ("mixtral-8x22b", "folding"): dict(cp=1, tp=2, ep=8, pp=8, etp=1),
    ("qwen2-57b-a14b", "mcore"): dict(cp=1, tp=2, ep=4, pp=4, etp=None),
    ("qwen2-57b-a14b", "folding"): dict(cp=1, tp=2, ep=4, pp=4, etp=1),
    ("g8t8", "mcore"): dict(cp=1, tp=2, ep=8, pp=8, etp=None),
    ("g8t8", "folding"): dict(cp=1, tp=4, ep=8, pp=8, etp=1),
    ("llama3-8x70b", "mcore"): dict(cp=1, tp=8, ep=4, pp=8, etp=None),
    ("llama3-8x70b", "folding"): dict(cp=1, tp=8, ep=8, pp=16, etp=1),
}

# (table, model, method, GPUs, GBS, seq, published MFU %, precision); the
# FP8 rows' MFU is Table 2's TFLOP/s over the BF16 peak, as the paper counts.
ROWS = [
    ("t3", "mixtral-8x22b", "mcore", 128, 256, 4096, 46.3, "bf16"),
    ("t3", "mixtral-8x22b", "folding", 128, 256, 4096, 49.3, "bf16"),
    ("t3", "qwen2-57b-a14b", "mcore", 64, 256, 4096, 35.3, "bf16"),
    ("t3", "qwen2-57b-a14b", "folding", 64, 256, 4096, 39.0, "bf16"),
    ("t3", "g8t8", "mcore", 128, 256, 4096, 17.1, "bf16"),
    ("t3", "g8t8", "folding", 128, 256, 4096, 28.8, "bf16"),
    ("t3", "llama3-8x70b", "mcore", 256, 256, 4096, 38.8, "bf16"),
    ("t3", "llama3-8x70b", "folding", 256, 256, 4096, 41.6, "bf16"),
    ("t2", "mixtral-8x22b", "mcore", 128, 256, 4096, round(100 * 575.1 / PEAK, 1), "fp8"),
    ("t2", "mixtral-8x22b", "folding", 128, 256, 4096, round(100 * 631.7 / PEAK, 1), "fp8"),
]
T4 = {
    ("mixtral-8x22b", "mcore"): {128: 49.4, 256: 48.0, 512: 45.5, 1024: 42.3},
    ("mixtral-8x22b", "folding"): {128: 52.2, 256: 50.7, 512: 48.9, 1024: 44.9},
    ("qwen2-57b-a14b", "mcore"): {64: 36.2, 128: 36.0, 256: 34.8, 512: 32.5, 1024: 29.8},
    ("qwen2-57b-a14b", "folding"): {64: 39.9, 128: 39.7, 256: 38.1, 512: 36.6, 1024: 33.4},
    ("g8t8", "mcore"): {128: 19.8, 256: 18.4, 512: 16.3, 1024: 13.4},
    ("g8t8", "folding"): {128: 30.0, 256: 29.3, 512: 26.7, 1024: 25.5},
    ("llama3-8x70b", "mcore"): {256: 40.1, 512: 39.5, 1024: 39.1},
    ("llama3-8x70b", "folding"): {128: 43.7, 512: 42.7, 1024: 41.5},
}
for (model, method), pts in T4.items():
    for gpus, mfu in pts.items():
        ROWS.append(("t4", model, method, gpus, 1024, 4096, mfu, "bf16"))
# Table 5, MCore w/ Folding (GPUs, seq, CP, TP, GBS, MFU %): EP 8, ETP 1, PP 8.
for gpus, seq, cp, tp, gbs, mfu in [(128, 16384, 4, 2, 1024, 47.6), (256, 32768, 8, 2, 512, 45.1),
                                    (512, 65536, 8, 4, 256, 44.5), (1024, 131072, 8, 8, 128, 42.9)]:
    ROWS.append(("t5", "mixtral-8x22b", "folding", gpus, gbs, seq, mfu, "bf16", dict(cp=cp, tp=tp, ep=8, pp=8, etp=1)))

# Rows more than 3 points from their published MFU when these rows were
# first run (2026-11-29), each with its likely cause; the evidence is in
# docs/benchmarks.md ("MoE MFU against published runs"). Nothing is fitted
# to them: tests/model/check_moe_mfu.py prints them beside the others and
# fails only on the rows not listed here.
OPTIMISTIC = ("over-predicted, as every Mixtral 8x22B and Qwen2 row is under Megatron-Core's overlap switches "
              "(the dense Llama 3 405B row moves from 42.9% to 51.7% under the same switches): the H100 "
              "profile's kernel rates and the modelled overlap are optimistic")
FP8 = ("FP8 GEMMs priced at the BF16 curve's fraction of the FP8 peak: a predicted FP8 speed-up of 1.50-1.53x "
       "against the paper's 1.26-1.30x (Table 2); and " + OPTIMISTIC)
FINE_GEMMS = ("fine-grained experts (+6-13 against Mixtral's +6-9): grouped GEMMs priced at the whole group's "
              "FLOPs (each expert's alone runs at 83-88% of that rate)")
FINE = (FINE_GEMMS + ", the all-to-all, 17% of the layer, at NVLink's large-message rate; and " + OPTIMISTIC)
FINE_ACROSS = (FINE_GEMMS + "; the EP all-to-all spans 2 nodes (ETP 2 x EP 8), NIC-bound at 2.2 ms a dispatch; "
               "and " + OPTIMISTIC)
LONG = ("context parallelism: from Table 4's 4K row to Table 5's 16K row with CP 4 (128 GPUs) the paper loses "
        "4.6 points, megasim 2.2 (1.2 before the ring's output merges and gradient sums were priced), and the gap "
        "stays at +9.0-9.9 to 128K while attention grows from 26% to 64% of the layer: CP's remaining costs (the "
        "chunks' copies, the smaller blocks' kernels) are not priced; and " + OPTIMISTIC)
README_MISS = ("the README does not tie its figure to this mapping, and its run was dropless (expert imbalance "
               "not modelled: cv 0); and " + OPTIMISTIC)
KNOWN_MISSES = {"mcore-readme-mixtral-8x7b-0064": README_MISS}
for _m in ("mcore", "folding"):
    KNOWN_MISSES["mpf-t2-mixtral-8x22b-%s-0128-fp8" % _m] = FP8
    KNOWN_MISSES["mpf-t3-mixtral-8x22b-%s-0128" % _m] = OPTIMISTIC
    KNOWN_MISSES["mpf-t3-qwen2-57b-a14b-%s-0064" % _m] = OPTIMISTIC
    for _g in (128, 256, 512, 1024):
        KNOWN_MISSES["mpf-t4-mixtral-8x22b-%s-%04d" % (_m, _g)] = OPTIMISTIC
        KNOWN_MISSES["mpf-t4-g8t8-%s-%04d" % (_m, _g)] = FINE_ACROSS if _m == "mcore" else FINE
    for _g in (64, 128, 256, 512, 1024):
        KNOWN_MISSES["mpf-t4-qwen2-57b-a14b-%s-%04d" % (_m, _g)] = OPTIMISTIC
# The Llama3-8x70B folding rows left the 3-point band on 2026-11-29 when
# the router's 512 x 8 x 8192 GEMM was priced as the narrow, split-K kernel
# cuBLAS runs (model/cost.c narrow_eff: 5.7 us, where a full 128 x 256 tile
# had cost 531 us a layer and micro-batch), and came back within it on
# 2026-11-30 when the built-in Hopper profiles took the weight gradients'
# fp32 accumulation measured on the H100 (model/hw_builtin.c): held again.
KNOWN_MISSES["mpf-t3-g8t8-mcore-0128"] = FINE_ACROSS
KNOWN_MISSES["mpf-t3-g8t8-folding-0128"] = FINE
for _g, _s in ((128, 16), (256, 32), (512, 64), (1024, 128)):
    KNOWN_MISSES["mpf-t5-mixtral-8x22b-folding-%04d-s%dk" % (_g, _s)] = LONG

TABLE = {"t3": "Table 3", "t4": "Table 4", "t5": "Table 5", "t2": "Table 2 (FP8)"}
METHOD = {"mcore": "MCore", "folding": "MCore w/ Folding"}


def row_file(table, model, method, gpus, gbs, seq, mfu, prec, plan=None):
    plan = plan or PLAN[(model, method)]
    mfile, mname = MODEL[model]
    with open(os.path.join(MODELS, mfile)) as f:
        job = json.load(f)
    job.pop("description")
    tp, pp, cp, ep = plan["tp"], plan["pp"], plan["cp"], plan["ep"]
    etp = plan["etp"] or tp
    dp = gpus // (tp * pp * cp)
    assert dp * tp * pp * cp == gpus and gbs % dp == 0, (model, method, gpus)
    name = "mpf-%s-%s-%s-%04d" % (table, model, method, gpus) + ("-s%dk" % (seq // 1024) if table == "t5" else "") \
        + ("-fp8" if prec == "fp8" else "")
    src = "%s, %s, %s, %s" % (PAPER, TABLE[table], mname, METHOD[method])
    if table == "t2":
        src += ", %.1f TFLOP/s a GPU over the %.1f TFLOP/s BF16 peak" % (mfu * PEAK / 100, PEAK)
    extra = (", FP8 hybrid (delayed scaling)" if prec == "fp8" else "") + \
        (", top-2 routing" if model == "llama3-8x70b" else "") + \
        (", ETP 1 (blank in Table 3)" if model == "llama3-8x70b" and method == "folding" else "")
    desc = ("%s: %d H100s (Eos), CP %d TP %d EP %d ETP %d PP %d (DP %d), GBS %d, seq %d, %s, capacity factor 1: "
            "published MFU %.1f%%. Assumed (not in the paper; experiments/moe-mfu/make-rows.py): micro-batch 1, one "
            "layer per virtual stage, Megatron-Core's overlap switches, all-to-all dispatcher, grouped GEMM, permute "
            "fusion%s." % (src, gpus, cp, tp, ep, etp, pp, dp, gbs, seq, prec.upper(), mfu, extra))
    job.update({
        "name": name, "description": desc,
        "num_gpus": gpus, "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
        "context_parallel_size": cp, "expert_model_parallel_size": ep, "expert_tensor_parallel_size": etp,
        "num_layers_per_virtual_pipeline_stage": 1 if pp > 1 else 0,
        "micro_batch_size": 1, "global_batch_size": gbs, "seq_length": seq,
        "sequence_parallel": True, "use_distributed_optimizer": True,
        "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": tp > 1,
        "pp_comm_overlap": pp > 1,
        "moe_token_dispatcher_type": "alltoall", "moe_grouped_gemm": True, "moe_permute_fusion": True,
        "moe_expert_capacity_factor": 1.0,
        "cluster": "fattree", "nic_gbit": 400,
    })
    if prec == "fp8":
        job["fp8_format"] = "hybrid"
    job["paper"] = {"publication": PAPER, "source": src, "mfu": round(mfu / 100, 4)}
    if name in KNOWN_MISSES:
        job["paper"]["known_miss"] = KNOWN_MISSES[name]
    return name, job


def readme_row():
    with open(os.path.join(MODELS, "mixtral-8x7b.json")) as f:
        job = json.load(f)
    job.pop("description")
    name = "mcore-readme-mixtral-8x7b-0064"
    src = README + ", \"468 TFLOPS for Mixtral 8X7B bf16 training\" (MCore v0.9) with its reference mapping"
    mfu = round(468 / PEAK, 4)
    job.update({
        "name": name,
        "description": "%s: Mixtral 8x7B dropless on 64 H100s (8 x H100 80GB HBM3 a node, InfiniBand 8 x 400 Gb/s), "
                       "TP 1 EP 8 PP 4 VP 8, MBS 1, GBS 256, seq 4096, all-to-all dispatcher, BF16: %.1f%% of the "
                       "%.1f TFLOP/s peak. The README does not say the figure was measured on that mapping (our "
                       "reading). Assumed as for the paper's rows (make-rows.py); dropless with even expert loads."
                       % (src, 100 * mfu, PEAK),
        "num_gpus": 64, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 4,
        "context_parallel_size": 1, "expert_model_parallel_size": 8, "expert_tensor_parallel_size": 1,
        "num_layers_per_virtual_pipeline_stage": 1, "micro_batch_size": 1, "global_batch_size": 256,
        "sequence_parallel": True, "use_distributed_optimizer": True,
        "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": False,
        "pp_comm_overlap": True,
        "moe_token_dispatcher_type": "alltoall", "moe_grouped_gemm": True, "moe_permute_fusion": True,
        "cluster": "fattree", "nic_gbit": 400,
    })
    job["paper"] = {"publication": README, "source": src, "mfu": mfu}
    if name in KNOWN_MISSES:
        job["paper"]["known_miss"] = KNOWN_MISSES[name]
    return name, job


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit("usage: make-rows.py [--check]")
    rows = [row_file(*r) for r in ROWS] + [readme_row()]
    unknown = set(KNOWN_MISSES) - {name for name, _ in rows}
    assert not unknown, "KNOWN_MISSES names no row: %s" % sorted(unknown)
    texts = {name + ".json": json.dumps(job, indent=2) + "\n" for name, job in rows}
    assert len(texts) == len(rows), "two rows share a name"
    if check:  # the checked-in rows are what this script writes, and no others
        on_disk = {f for f in os.listdir(HERE) if f.endswith(".json")}
        stale = sorted(f for f in texts if f not in on_disk or open(os.path.join(HERE, f)).read() != texts[f])
        extra = sorted(on_disk - set(texts))
        print("%d rows: %d stale or missing %s, %d not written by make-rows.py %s"
              % (len(texts), len(stale), stale, len(extra), extra))
        return 1 if stale or extra else 0
    for f, text in texts.items():
        with open(os.path.join(HERE, f), "w") as out:
            out.write(text)
    print("wrote %d rows to %s" % (len(rows), HERE))
    return 0


if __name__ == "__main__":
    sys.exit(main())

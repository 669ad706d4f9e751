"""real/bench/steps.py: the per-step records of a run's JSON lines
(`megasim run --json`, real/bench/torch_gpt.py), other lines skipped; for
the summaries scripts/gpu-real.sh prints."""
import json


def steps(path):
    out = []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and "step" in r and "step_time_s" in r:
            out.append(r)
    return out

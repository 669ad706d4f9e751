#!/usr/bin/env python3
"""check_bounds: `megasim reproduce table2`'s "Table 2 against itself"
diagnostics (cmd/reproduce_bounds.c, GSL's nonlinear least squares) against
the same fits done here independently: the paper's Table 2 rows read from
the experiment files, and a Levenberg-Marquardt least squares written in
plain Python (no GSL, no scipy).

Shapes (ASSUMPTIONS.md, "What the closed form gets"), with m micro-batches
per pipeline = batch / (micro-batch x GPUs / (TP x PP)), and the MFU a time
T gives = paper MFU x paper iteration time / T:
  flat        T = m C + O
  slow hosts  T = m C (1 + s (1 - 0.995^nodes)) + O, 8 GPUs a node.
Checked: each system's fit to all its rows (C, O, s, mean and max |error|),
and each shape fitted to one global batch's rows and evaluated on the
other's (mean and max |error|, s).

usage: check_bounds.py MEGASIM EXPERIMENTS_DIR"""
import glob, json, os, re, subprocess, sys, tempfile

megasim, expdir = sys.argv[1], sys.argv[2]
SLOW_HOST_RATE, GPUS_PER_NODE = 0.005, 8  # the paper's 0.5% slow hosts; A800 nodes
failures = passed = 0


def check(what, expected, got, tol, source):
    global failures, passed
    ok = got is not None and abs(got - expected) <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {expected:.4f} ({source}), got {got}, tolerance {tol}")
    failures += not ok
    passed += ok


def rows():
    out = []
    for path in sorted(glob.glob(os.path.join(expdir, "table2-*.json"))):
        j = json.load(open(path))
        dp = j["num_gpus"] // (j["tensor_model_parallel_size"] * j["pipeline_model_parallel_size"])
        out.append({"system": j["preset"], "batch": j["global_batch_size"],
                    "m": j["global_batch_size"] / (j.get("micro_batch_size", 1) * dp),
                    "nodes": j["num_gpus"] / GPUS_PER_NODE, "y": 100 * j["paper"]["mfu"],
                    "k": 100 * j["paper"]["mfu"] * j["paper"]["iteration_time_s"]})
    return out


def model(p, r, slow):
    stretch = 1 + (p[2] * (1 - (1 - SLOW_HOST_RATE) ** r["nodes"]) if slow else 0)
    return r["k"] / (r["m"] * p[0] * stretch + p[1])


def solve(a, b):
    """Gaussian elimination with partial pivoting, for the normal equations."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda i: abs(m[i][c]))
        m[c], m[piv] = m[piv], m[c]
        for i in range(c + 1, n):
            f = m[i][c] / m[c][c]
            for k in range(c, n + 1):
                m[i][k] -= f * m[c][k]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][k] * x[k] for k in range(i + 1, n))) / m[i][i]
    return x


def fit(rs, slow):
    """Levenberg-Marquardt on the MFU residuals, from the same start as
    reproduce_bounds.c (C 0.2 s, O 1 s, s 0.05), central differences."""
    p = [0.2, 1.0, 0.05][: 3 if slow else 2]
    sse = lambda q: sum((model(q, r, slow) - r["y"]) ** 2 for r in rs)
    lam, cur = 1e-3, sse(p)
    for _ in range(500):
        res = [model(p, r, slow) - r["y"] for r in rs]
        jac = []
        for r in rs:
            row = []
            for i in range(len(p)):
                h = 1e-6 * max(1.0, abs(p[i]))
                up, dn = p[:], p[:]
                up[i] += h
                dn[i] -= h
                row.append((model(up, r, slow) - model(dn, r, slow)) / (2 * h))
            jac.append(row)
        n = len(p)
        jtj = [[sum(jr[a] * jr[b] for jr in jac) for b in range(n)] for a in range(n)]
        jtr = [sum(jac[k][a] * res[k] for k in range(len(rs))) for a in range(n)]
        while True:
            a = [[jtj[i][j] * (1 + lam if i == j else 1) for j in range(n)] for i in range(n)]
            q = [pi + di for pi, di in zip(p, solve(a, [-v for v in jtr]))]
            new = sse(q)
            if new <= cur:
                done = cur - new <= 1e-15 * max(cur, 1e-30)
                p, cur, lam = q, new, lam / 10
                break
            lam *= 10
            if lam > 1e12:
                return p
        if done:
            break
    return p


def errors(p, rs, slow):
    e = [abs(model(p, r, slow) - r["y"]) for r in rs]
    return sum(e) / len(e), max(e)


with tempfile.TemporaryDirectory() as d:
    out = subprocess.run([megasim, "reproduce", "table2", "--no-sim", "--no-plot", "--out", os.path.join(d, "t2.h5"),
                          "--experiments", expdir], capture_output=True, text=True)
if out.returncode:
    print(f"FAIL megasim reproduce table2 exited with {out.returncode}: {out.stderr.strip()}")
    sys.exit(1)
text = out.stdout
num = r"(-?[0-9.]+)"
names = {"megascale": "MegaScale", "megatron-lm": "Megatron-LM"}
def line(pat, what):
    """The numbers of reproduce's line matching pat; None (a failure) if absent."""
    global failures
    m = re.search(pat, text, re.M)
    if not m:
        print(f"FAIL {what}: no line of the form /{pat}/ in reproduce's output")
        failures += 1
    return [float(v) for v in m.groups()] if m else None


all_rows = rows()
for system, name in names.items():
    rs = [r for r in all_rows if r["system"] == system]
    for slow in (0, 1):
        shape = "slow hosts" if slow else "flat"
        p = fit(rs, slow)
        mean, worst = errors(p, rs, slow)
        pat = (rf"^\s+{re.escape(name)}\s+{shape}\s+C = {num} s per micro-batch, O = {num} s"
               + (rf", s = {num} \+- {num}" if slow else "") + rf": mean \|error\| {num}, max {num} points")
        g = line(pat, f"{name} {shape}")
        if g is None:
            continue
        src = f"Python least squares over {len(rs)} rows"
        check(f"{name} {shape} C, s", p[0], g[0], 5e-4, src)
        check(f"{name} {shape} O, s", p[1], g[1], 0.01, src)
        if slow:
            check(f"{name} {shape} s", p[2], g[2], 0.002, src)
        check(f"{name} {shape} mean |error|, points", mean, g[-2], 0.011, src)
        check(f"{name} {shape} max |error|, points", worst, g[-1], 0.011, src)
        batches = sorted({r["batch"] for r in rs})
        for a, b in ((batches[0], batches[1]), (batches[1], batches[0])):
            fa = fit([r for r in rs if r["batch"] == a], slow)
            mean, worst = errors(fa, [r for r in rs if r["batch"] == b], slow)
            pat = (rf"^\s+{re.escape(name)}\s+{shape}\s+fitted at batch {a} \(\d+ rows"
                   + (rf", s = {num}" if slow else "") + rf"\), at batch {b}: mean \|error\| {num}, max {num} points")
            g = line(pat, f"{name} {shape} {a} -> {b}")
            if g is None:
                continue
            src = f"Python least squares, fitted at batch {a}, evaluated at {b}"
            if slow:
                check(f"{name} {shape} {a} -> {b}: s", fa[2], g[0], 0.002, src)
            check(f"{name} {shape} {a} -> {b}: mean |error|, points", mean, g[-2], 0.011, src)
            check(f"{name} {shape} {a} -> {b}: max |error|, points", worst, g[-1], 0.011, src)
print(f"check_bounds: {passed} passed, {failures} failed")
sys.exit(1 if failures or not passed else 0)

#!/usr/bin/env python3
"""tests/fuzz/check_corpus.py MEGASIM CORPUS_DIR: replays every input the
fuzzers (scripts/fuzz.sh) or a person found, through the command a user
would feed it to, and holds megasim to its bad-input rule: exit 0, or exit
2 with one clear message; never a signal, a sanitizer report, another exit
code, or more than TIMEOUT_S seconds. A file FILE.expect beside an input
holds text its message must contain (the finding's regression test): a
line "TEXT" for every command, "CMD: TEXT" for one (plot, compare,
predict, goodput).

  corpus/job/*       megasim predict FILE                (job files)
  corpus/hardware/*  megasim predict --hardware FILE,    (profiles)
                     goodput --hardware FILE (short)
  corpus/flags/*     megasim ARGS (one argument a line;  (command lines)
                     @CORPUS@ stands for the corpus folder)
  corpus/result/*    megasim plot FILE --outdir TMP, compare FILE,
                     predict --replay FILE               (result files)
"""
import os
import subprocess
import sys
import tempfile

TIMEOUT_S = 20


def commands(megasim, kind, path, tmp):
    if kind == "job":
        return [[megasim, "predict", path]]
    if kind == "hardware":
        return [[megasim, "predict", "--hardware", path],
                [megasim, "goodput", "--hardware", path, "--trials", "20", "--sweep-trials", "5"]]
    if kind == "flags":
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return [[megasim] + [a.replace("@CORPUS@", os.path.dirname(os.path.dirname(path)))
                                 for a in f.read().split("\n") if a != ""]]
    if kind == "result":
        return [[megasim, "plot", path, "--outdir", tmp], [megasim, "compare", path],
                [megasim, "predict", "--replay", path]]
    return []


def expected(lines, cmd):
    """The text cmd's message must hold, from FILE.expect's lines (or None)."""
    for line in lines:
        head, sep, text = line.partition(": ")
        if sep and head in ("plot", "compare", "predict", "simulate"):
            if head == cmd[1]:
                return text
        elif line:
            return line
    return None


def judge(cmd, expect):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"still running after {TIMEOUT_S} s"
    err = p.stderr.decode("utf-8", "replace")
    lines = [l for l in err.splitlines() if l.strip() and ": note:" not in l]
    if p.returncode not in (0, 2):
        return f"exit {p.returncode}" + (f" (signal {-p.returncode})" if p.returncode < 0 else "") + \
               f"; stderr: {err[-400:]!r}"
    if "runtime error" in err or "Sanitizer" in err:
        return f"a sanitizer report: {err[-400:]!r}"
    if p.returncode == 2 and len(lines) != 1:
        return f"exit 2 with {len(lines)} stderr lines, expected one message: {err[-400:]!r}"
    if expect and (p.returncode != 2 or expect not in err):
        return f"expected exit 2 with a message containing {expect!r}; got exit {p.returncode}: {err[-300:]!r}"
    return None


def main():
    megasim, corpus = sys.argv[1], sys.argv[2]
    bad, n = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind in sorted(os.listdir(corpus)):
            folder = os.path.join(corpus, kind)
            if not os.path.isdir(folder) or kind == "data":  # data/: files the flags name
                continue
            for name in sorted(os.listdir(folder)):
                if name.endswith(".expect") or name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                lines = []
                if os.path.exists(path + ".expect"):
                    with open(path + ".expect", encoding="utf-8") as f:
                        lines = [l.strip() for l in f.read().splitlines()]
                for cmd in commands(megasim, kind, path, tmp):
                    n += 1
                    why = judge(cmd, expected(lines, cmd))
                    shown = " ".join(os.path.relpath(a, corpus) if a.startswith(corpus) else a for a in cmd[1:])
                    print(("FAIL " if why else "ok   ") + f"{kind}/{name}: megasim {shown}" + (f": {why}" if why else ""))
                    if why:
                        bad.append(name)
    print(f"corpus: {n} runs; expected every one to exit 0, or 2 with one message (and the .expect text); "
          f"got {len(bad)} that did not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

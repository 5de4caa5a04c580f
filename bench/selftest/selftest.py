#!/usr/bin/python3
"""Tests of the benchmark suite itself (run by ctest; quick, no peers needed).

    selftest.py CASE [ARG]

Cases about the runner use fake benchmark programs (shell scripts) in a
temporary directory, so they need neither the real programs nor any peer
allocator installed:
    missing_allocator  a peer whose library does not exist is skipped, said so
    corrupt            a program that exits 3 with CORRUPT is reported loudly
    mismatch           a run whose detected allocator differs is flagged
    missing_program    a test whose program is not built is skipped, said so
    plan               quick mode's plan fits in 10 minutes and covers issues 3
                       and 8 (the churn working-set axis, producer/consumer,
                       mixed sizes, large blocks)
    churn_grid         churn cells too big for memory are scaled down and
                       labelled; the churn table shows each live size
    aggregate          ratios and geometric means computed right
    failures           a FAILED cell (crash, CORRUPT, timeout) counts as a loss
                       with the documented penalty; a mismatch does not
    report_charts      report.md and PNGs from a synthetic CSV (skips without
                       matplotlib: exit 77)
Cases about the HTTP server (ARG = the webserver binary):
    server             answers, gzip decodes, sessions, keep-alive, pipelining,
                       bad requests, concurrent clients
    server_sigterm     stops cleanly (exit 0) on SIGTERM with clients connected

Exit 0 pass, 1 fail, 77 skipped.
"""
import csv
import gzip
import http.client
import math
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
RUN_PY = os.path.join(BENCH, "run.py")
PY = sys.executable or "/usr/bin/python3"
SKIP = 77

sys.path.insert(0, BENCH)


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok: " + what)


# ---- fake benchmark programs --------------------------------------------------

FAKE = r"""#!/bin/sh
# A fake benchmark program: names the allocator after the preloaded file.
case "${LD_PRELOAD##*/}" in
  *spry*) a=spry ;; *jemalloc*) a=jemalloc ;; *tcmalloc*) a=tcmalloc ;;
  *mimalloc*) a=mimalloc ;; *) a=glibc ;;
esac
if [ -n "$FAKE_CORRUPT_UNDER" ] && [ "$a" = "$FAKE_CORRUPT_UNDER" ]; then
  echo "CORRUPT test=@TEST@ block 0x1234 size 48: stamp overwritten" >&2
  exit 3
fi
echo "RESULT test=@TEST@ allocator=$a @KV@ maxrss_kb=2048"
"""

FAKE_KV = {
    "objects": "count=1 alloc_s=0.50 free_s=0.25",
    "shrink_realloc": "count=1 loops=1 seconds=0.3 free_s=0.01",
}


def make_bench_dir(tmp, tests):
    d = os.path.join(tmp, "bench")
    os.makedirs(d, exist_ok=True)
    for t in tests:
        p = os.path.join(d, t)
        with open(p, "w") as f:
            f.write(FAKE.replace("@TEST@", t).replace("@KV@", FAKE_KV[t]))
        os.chmod(p, 0o755)
    return d


def fake_lib(tmp, name):
    """An empty file: LD_PRELOAD of it is ignored by ld.so with a warning,
    which is all a fake allocator needs (the fake programs read the name)."""
    p = os.path.join(tmp, name)
    open(p, "w").close()
    return p


def run_py(args, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra or {})
    r = subprocess.run([PY, RUN_PY] + args, capture_output=True, text=True, env=env,
                       timeout=timeout)
    print("$ run.py " + " ".join(args))
    print(r.stdout)
    if r.stderr.strip():
        print("stderr (last lines):\n" + "\n".join(r.stderr.strip().splitlines()[-8:]))
    return r


def read_csv(out):
    with open(os.path.join(out, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def read(path):
    with open(path) as f:
        return f.read()


# ---- runner cases ---------------------------------------------------------------

def case_missing_allocator(tmp):
    bench = make_bench_dir(tmp, ["objects"])
    out = os.path.join(tmp, "out")
    r = run_py(["--quick", "--only", "objects", "--allocators", "glibc,jemalloc",
                "--lib", "jemalloc=/nonexistent/libjemalloc.so.2", "--bench-dir", bench,
                "--out", out, "--no-charts"])
    check(r.returncode == 0, "run.py exits 0 (exit %d)" % r.returncode)
    check(re.search(r"allocator jemalloc skipped: no such file: /nonexistent", r.stdout),
          "run.py prints that jemalloc is skipped and why")
    rep = read(os.path.join(out, "report.md"))
    check(re.search(r"\| jemalloc \|.*\*\*skipped\*\*: no such file", rep),
          "report.md lists jemalloc as skipped with the reason")
    rows = read_csv(out)
    check(rows and all(r["allocator"] == "glibc" for r in rows),
          "results.csv holds glibc runs only")


def case_corrupt(tmp):
    bench = make_bench_dir(tmp, ["objects"])
    lib = fake_lib(tmp, "libspry.so")
    out = os.path.join(tmp, "out")
    r = run_py(["--quick", "--only", "objects", "--allocators", "glibc,spry",
                "--lib", "spry=" + lib, "--bench-dir", bench, "--out", out, "--no-charts",
                "--repeats", "2"], env_extra={"FAKE_CORRUPT_UNDER": "spry"})
    check(r.returncode == 3, "run.py exits 3 when a run is CORRUPT (exit %d)" % r.returncode)
    check("CORRUPT" in r.stderr and "!!!" in r.stderr, "the progress output says CORRUPT loudly")
    check("CORRUPT" in r.stdout, "the closing lines say CORRUPT")
    rows = read_csv(out)
    spry = [x for x in rows if x["allocator"] == "spry"]
    check(len(spry) == 2 and all(x["status"] == "CORRUPT" for x in spry),
          "results.csv records both spry runs as CORRUPT (not dropped)")
    check(all(x["status"] == "ok" for x in rows if x["allocator"] == "glibc"),
          "glibc runs are ok")
    rep = read(os.path.join(out, "report.md"))
    check("\u26a0 CORRUPT" in rep and re.search(r"\| objects \|.*\| spry \|.*\*\*CORRUPT\*\*", rep),
          "report.md's Problems section lists the CORRUPT runs")
    check(re.search(r"\| count=1\S* \| [0-9.]+ \| \*\*CORRUPT\*\* \|", rep) or
          re.search(r"\*\*CORRUPT\*\* \|", rep), "the test's table shows CORRUPT in spry's column")
    logs = os.listdir(os.path.join(out, "logs"))
    check(any("spry" in l for l in logs), "the failed run's output is kept in logs/")
    # glibc's total_s is 0.75: spry's FAILED cell counts as twice that.
    check(re.search(r"\| glibc \| \*\*2\.00 \u25b2\*\* \|", rep),
          "the summary counts the CORRUPT cell as a loss for spry (time ratio 2.00), not dropped")
    check("**1 cell(s) FAILED**" in rep, "the Problems section counts the FAILED cell")


def case_mismatch(tmp):
    bench = make_bench_dir(tmp, ["objects"])
    lib = fake_lib(tmp, "libother.so")      # its name does not say spry
    out = os.path.join(tmp, "out")
    r = run_py(["--quick", "--only", "objects", "--allocators", "glibc,spry",
                "--lib", "spry=" + lib, "--bench-dir", bench, "--out", out, "--no-charts"])
    check(r.returncode == 0, "run.py exits 0 (exit %d)" % r.returncode)
    rows = read_csv(out)
    spry = [x for x in rows if x["allocator"] == "spry"]
    check(spry and all(x["status"] == "mismatch (found glibc)" for x in spry),
          "the spry run is flagged: mismatch (found glibc)")
    check(all(x["detected"] == "glibc" for x in spry), "the detected allocator is recorded")
    rep = read(os.path.join(out, "report.md"))
    check("mismatch (found glibc)" in rep, "report.md lists the mismatch")
    check(re.search(r"\| count=\d+ \| [0-9.]+ \| \*\*mismatch \(found glibc\)\*\* \| - \|", rep),
          "the table shows the mismatch instead of a number, and no ratio")


def case_missing_program(tmp):
    bench = make_bench_dir(tmp, ["objects"])
    out = os.path.join(tmp, "out")
    r = run_py(["--quick", "--only", "objects,shrink_realloc", "--allocators", "glibc",
                "--bench-dir", bench, "--out", out, "--no-charts"])
    check(r.returncode == 0, "run.py exits 0 (exit %d)" % r.returncode)
    check(re.search(r"test shrink_realloc skipped: program .*shrink_realloc not built", r.stdout),
          "run.py prints that shrink_realloc is skipped")
    rep = read(os.path.join(out, "report.md"))
    check(re.search(r"\*\*shrink_realloc\*\*: program .* not built", rep),
          "report.md says the test was not run and why")


def case_plan(tmp):
    import run as runner
    from report import suite
    notes = {}
    cells = runner.plan("quick", 4, notes)
    tests = {c.test for c in cells}
    check(tests == set(suite.TESTS), "quick mode covers every test of issue 3 (%s)"
          % ", ".join(sorted(tests)))
    churn = [c for c in cells if c.test == "churn"]
    threads = sorted({c.params["threads"] for c in churn})
    bands = sorted({(c.params["min"], c.params["max"]) for c in churn})
    check(threads == [1, 2, 4, 8, 16, 32, 64], "churn threads 1..64")
    check(len(bands) >= 8 and bands[0][0] == 8 and bands[-1][1] == 1 << 20 and
          any(b[1] == 256 << 10 for b in bands), "churn has >= 8 bands from 8 B to 256 KiB and 1 MiB")
    lives = sorted({c.params["live"] for c in churn})
    check(lives == [64, 1024, 4096], "churn has the working-set axis 64, 1024, 4096")
    for live in (1024, 4096):
        grid = {(c.params["min"], c.params["max"], c.params["threads"])
                for c in churn if c.params["live"] == live}
        want = {(lo, hi, t) for lo, hi in runner.CHURN_TABLE_BANDS
                for t in runner.CHURN_TABLE_THREADS}
        check(grid == want, "live=%d covers issue 8's grid (4 bands x threads 1,2,8,64)" % live)
    check(all("--live" in c.args and c.args[c.args.index("--pattern") + 1] == "steps"
              for c in churn), "every churn cell passes --live and the steps pattern")
    pc = [c for c in cells if c.test == "prodcons"]
    check(sorted(c.params["threads"] for c in pc) == [2, 8] and
          all(c.params["producers"] + c.params["consumers"] == c.params["threads"] for c in pc),
          "producer/consumer at 2 and 8 threads in quick mode")
    mixed = [c for c in cells if c.test == "mixed"]
    check(mixed and all(c.params["live"] >= 100_000 for c in mixed),
          "mixed sizes with a live set of 100k blocks or more")
    large = [c for c in cells if c.test == "large"]
    check(sorted(c.params["threads"] for c in large
                 if (c.params["min"], c.params["max"]) == (256 << 10, 32 << 20)) == [1, 4],
          "the large-block loop spans 256 KiB-32 MiB at 1 and 4 threads")
    check(any((c.params["min"], c.params["max"]) == (2 << 20, 64 << 20) for c in large),
          "and a wider band of 2-64 MiB")
    n_alloc = len(suite.ALLOCATORS)
    est = sum(c.est * (1 if c.only else n_alloc) for c in cells)
    check(est < 450, "quick plan estimate %.0f s for 5 allocators leaves room under 600 s" % est)
    full = runner.plan("full", 4, {})
    sr = [c for c in full if c.test == "shrink_realloc"][0]
    check(sr.params["count"] == 3_000_000 and sr.params["loops"] == 10,
          "full mode uses the seed's shrink-realloc size")
    check(all("--seed" in c.args for c in full if c.test in ("churn", "chunks", "frag", "pools")),
          "randomized tests pass a fixed seed")
    r = run_py(["--quick", "--dry-run", "--bench-dir", tmp, "--allocators", "glibc"])
    check(r.returncode == 0 and "estimated" in r.stdout, "--dry-run prints the plan")


def synthetic_rows(with_live=False):
    """Four churn cells, objects and pools for glibc, jemalloc, spry: spry
    twice as fast as both in churn, 4x in objects; faster in one pools cell,
    FAILED (a timeout in one of its runs) in the other. with_live adds four
    churn cells at live=1024 (one group per live size in the report)."""
    rows = []

    def add(test, cell, params, alloc, metric, value, rss, status="ok", rep=0):
        rows.append({"test": test, "cell": cell, "params": params, "allocator": alloc,
                     "detected": alloc, "repeat": rep, "status": status, "metric": metric,
                     "value": value, "better": "", "maxrss_kb": rss, "wall_s": 0.1})

    for t in (1, 2):
        for lo, hi in ((8, 32), (32, 128)):
            cell = "threads=%d band=%d-%dB" % (t, lo, hi)     # an older run: no live param
            params = "threads=%d;band=%d-%dB;min=%d;max=%d" % (t, lo, hi, lo, hi)
            for rep in (0, 1):
                add("churn", cell, params, "glibc", "mops", 10.0 * t + rep, 1000, rep=rep)
                add("churn", cell, params, "jemalloc", "mops", 10.0 * t + rep, 2000, rep=rep)
                add("churn", cell, params, "spry", "mops", 20.0 * t + 2 * rep, 1000, rep=rep)
    if with_live:       # the working-set axis: spry 0.8x jemalloc at live=1024
        for t in (1, 2):
            for lo, hi in ((8, 32), (32, 128)):
                run = 1024 if t == 1 else 300
                live = "1024" if run == 1024 else "1024->300"
                cell = "live=%s threads=%d band=%d-%dB" % (live, t, lo, hi)
                params = "live=1024;live_run=%d;threads=%d;band=%d-%dB;min=%d;max=%d" % (
                    run, t, lo, hi, lo, hi)
                add("churn", cell, params, "glibc", "mops", 5.0 * t, 3000)
                add("churn", cell, params, "jemalloc", "mops", 10.0 * t, 3000)
                add("churn", cell, params, "spry", "mops", 8.0 * t, 3000)
    for a, v in (("glibc", 4.0), ("jemalloc", 4.0), ("spry", 1.0)):
        add("objects", "count=10", "count=10", a, "total_s", v, 4096)
        add("objects", "count=10", "count=10", a, "alloc_s", v * 0.75, 4096)
    for k in (1, 4):
        cell = "kind=list threads=4 subpools=%d" % k
        params = "kind=list;subpools=%d;threads=4;ops=10" % k
        add("pools", cell, params, "glibc", "seconds", 2.0, 3000)
        add("pools", cell, params, "jemalloc", "seconds", 1.0 if k == 4 else 2.0, 3000)
        add("pools", cell, params, "spry", "seconds", 1.5 if k == 4 else 1.0, 3000)
    add("pools", "kind=list threads=4 subpools=4", "kind=list;subpools=4;threads=4;ops=10",
        "spry", "", "", "", status="timeout", rep=1)
    return rows


def write_csv(path, rows):
    from report import aggregate
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=aggregate.CSV_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def case_aggregate(tmp):
    from report import aggregate
    path = os.path.join(tmp, "results.csv")
    write_csv(path, synthetic_rows())
    res = aggregate.Results.load(path)
    check(res.tests == ["churn", "objects", "pools"], "tests in suite order")
    st = res.stat("churn", "threads=1 band=8-32B", "spry", "mops")
    check(st.n == 2 and abs(st.median - 21.0) < 1e-9 and st.min == 20 and st.max == 22,
          "median and spread over repeats")
    r = res.time_ratio("churn", "threads=2 band=8-32B", "glibc")
    check(abs(r - (20.5 / 41.0)) < 1e-9, "rate ratio is inverted into a time ratio (%.3f)" % r)
    check(abs(res.time_ratio("objects", "count=10", "jemalloc") - 0.25) < 1e-9,
          "time ratio spry/peer for a time metric")
    check(abs(res.rss_ratio("churn", "threads=1 band=8-32B", "jemalloc") - 0.5) < 1e-9,
          "RSS ratio spry/peer")
    summ = res.summary()
    # vs jemalloc: churn gm 0.5 (all cells ~0.5: (10+.5)/(20+1)), objects 0.25,
    # pools gm of (1.0/2.0, 4.0/1.0): spry's timed-out cell counts as twice
    # the worst finisher's 2.0 s.
    churn_gm = summ["jemalloc"]["tests"]["churn"][0]
    expect = math.exp((math.log(churn_gm) + math.log(0.25) + math.log(math.sqrt(2.0))) / 3)
    check(abs(summ["jemalloc"]["time"] - expect) < 1e-9,
          "overall geomean is the geomean of the per-test geomeans, FAILED cell included (%.4f)"
          % expect)
    check(summ["jemalloc"]["failed"] == (1, 0), "the summary counts spry's FAILED cell")
    best = res.best_peer("objects", "count=10")
    check(best[1] in ("glibc", "jemalloc") and abs(best[0] - 0.25) < 1e-9,
          "ratio to the best peer of a cell")
    losses = res.losses()
    check([(t, c, p) for t, c, p, _ in losses] ==
          [("pools", "kind=list threads=4 subpools=4", "jemalloc"),
           ("pools", "kind=list threads=4 subpools=4", "glibc")],
          "the FAILED cell is a loss against both peers, worst first")
    probs = res.problems()
    check(len(probs) == 1 and probs[0].status == "timeout", "a timeout is a problem, not dropped")


def failure_rows():
    """mixed (seconds, lower is better) and prodcons (mops, higher is better)
    under five allocators, with failures of every kind."""
    rows = []

    def add(test, cell, alloc, value, status="ok", rss=1000):
        rows.append({"test": test, "cell": cell, "params": cell.replace(" ", ";"),
                     "allocator": alloc, "detected": alloc, "repeat": 0, "status": status,
                     "metric": "seconds" if test == "mixed" else "mops",
                     "value": value if status == "ok" else "", "better": "",
                     "maxrss_kb": rss if status == "ok" else "", "wall_s": 0.1})

    peers = ["glibc", "jemalloc", "tcmalloc", "mimalloc"]
    for a, v in zip(peers + ["spry"], (2.0, 1.0, 1.0, 1.0, 1.0)):    # A: all finish
        add("mixed", "case=A", a, v)
    for a, v in zip(peers, (4.0, 2.0, 2.0, 2.0)):                     # B: spry crashes
        add("mixed", "case=B", a, v, rss=2000)
    add("mixed", "case=B", "spry", None, status="crashed (SIGSEGV)")
    for a, v in zip(peers + ["spry"], (3.0, None, 1.0, 1.0, 1.0)):    # C: jemalloc CORRUPT
        add("mixed", "case=C", a, v, status="CORRUPT" if a == "jemalloc" else "ok")
    for a, v in zip(peers + ["spry"], (2.0, None, 1.0, 1.0, None)):   # D: both time out
        add("mixed", "case=D", a, v, status="timeout" if v is None else "ok")
    for a, v in zip(peers + ["spry"], (2.0, 1.0, 1.0, 1.0, None)):    # E: spry's preload
        add("mixed", "case=E", a, v, status="mismatch (found glibc)" if v is None else "ok")
    for a, v in zip(peers + ["spry"], (4.0, 8.0, 10.0, 6.0, None)):   # a rate: spry killed
        add("prodcons", "threads=2", a, v, status="killed (RSS over 100 MiB)" if v is None else "ok")
    return rows


def case_failures(tmp):
    from report import aggregate, markdown
    path = os.path.join(tmp, "results.csv")
    write_csv(path, failure_rows())
    res = aggregate.Results.load(path)
    check(res.failure("mixed", "case=B", "spry") == "crashed (SIGSEGV)" and
          res.failure("mixed", "case=A", "spry") is None, "a crash makes the cell FAILED")
    check(res.failure("mixed", "case=E", "spry") is None,
          "a mismatch (the preload did not take) is not the allocator's failure")
    pen = aggregate.FAILURE_PENALTY
    check(res.effective("mixed", "case=B", "spry", "seconds") == (4.0 * pen, True),
          "a FAILED time is the worst finisher's times %g" % pen)
    check(abs(res.time_ratio("mixed", "case=B", "jemalloc") - 4.0 * pen / 2.0) < 1e-9,
          "spry's crash is a loss against every peer (%.1f vs jemalloc)" % (4.0 * pen / 2.0))
    check(abs(res.time_ratio("mixed", "case=C", "jemalloc") - 1.0 / (3.0 * pen)) < 1e-9,
          "a peer's CORRUPT cell is a loss for that peer")
    check(res.time_ratio("mixed", "case=D", "jemalloc") is None and
          abs(res.time_ratio("mixed", "case=D", "glibc") - pen) < 1e-9,
          "both failed: no ratio; against a finisher spry's timeout counts")
    check(res.time_ratio("mixed", "case=E", "glibc") is None, "a mismatch leaves no ratio")
    check(abs(res.time_ratio("prodcons", "threads=2", "tcmalloc") - 10.0 / (4.0 / pen)) < 1e-9,
          "a FAILED rate is the slowest finisher's divided by %g" % pen)
    check(abs(res.rss_ratio("mixed", "case=B", "glibc") - pen) < 1e-9,
          "a FAILED cell's peak RSS is the worst finisher's times %g" % pen)
    summ = res.summary()
    # vs tcmalloc: A 1, B 8/2, C 1, D (spry timed out) 2*2/1; E no ratio
    tr = [1.0, 4.0 * pen / 2.0, 1.0, 2.0 * pen / 1.0]
    gm = math.exp(sum(math.log(v) for v in tr) / len(tr))
    check(abs(summ["tcmalloc"]["tests"]["mixed"][0] - gm) < 1e-9,
          "the geometric mean counts the FAILED cells (%.4f)" % gm)
    check(summ["jemalloc"]["failed"] == (3, 2), "FAILED cells counted per side (spry 3, jemalloc 2)")
    check("best peer" in summ, "the summary has a best-peer column")
    check(("mixed", "case=B", "tcmalloc") in [(t, c, p) for t, c, p, _ in res.losses()],
          "spry's crash is listed among the losses")
    out = os.path.join(tmp, "report.md")
    markdown.write(res, {}, {}, out)
    rep = read(out)
    check(re.search(r"\| case=B \|.*\| \*\*FAILED\*\* \(crashed \(SIGSEGV\)\) \|", rep),
          "the table shows FAILED and why in spry's column")
    check(re.search(r"\| case=B \|.*\*\*FAILED 4\.00 \u25b2\*\*", rep),
          "the ratio column shows the penalty ratio, marked FAILED")
    check("(jemalloc FAILED)" in rep, "a peer's failure is marked in the ratio column")
    check(re.search(r"\*\*\d+ cell\(s\) FAILED\*\*", rep) and "made 2 times worse" in rep,
          "the Problems section explains the penalty")


def case_churn_grid(tmp):
    import run as runner
    from report import aggregate, markdown
    notes = []
    grid = [(64, [(8, 32)], [1], 0.1), (4096, [(65536, 524288)], [1, 64], 0.1)]
    cells = runner.churn_cells(grid, 8 << 30, notes)
    big = [c for c in cells if c.params["threads"] == 64][0]
    check(big.params["live"] == 4096 and big.params["live_run"] < 4096 and
          big.args[big.args.index("--live") + 1] == str(big.params["live_run"]),
          "a cell that would hold 72 GiB runs with fewer live blocks (%d)" % big.params["live_run"])
    check(big.params["live_run"] * 64 * (65536 + 524288) / 2 <= 8 << 30, "and fits the budget")
    check("->" in big.label and len(notes) == 1 and "Scaled down" in notes[0],
          "its label and a note say so: " + big.label)
    small = [c for c in cells if c.params["threads"] == 1 and c.params["live"] == 4096][0]
    check(small.params["live_run"] == 4096, "a cell that fits is not scaled")
    path = os.path.join(tmp, "results.csv")
    write_csv(path, synthetic_rows(with_live=True))
    res = aggregate.Results.load(path)
    lines = markdown.churn_table(res)
    text = "\n".join(lines)
    print(text)
    check("## live = 64 blocks per thread" in text and "## live = 1024 blocks per thread" in text,
          "the churn table has a section per live size")
    check("300 (scaled)" in text, "the scaled cell is marked in the table")
    check(re.search(r"\| 0\.80 \(jemalloc\) \| \*\*no\*\* \|", text),
          "spry at 0.8x the best peer misses the 0.95 target")
    out = os.path.join(tmp, "report.md")
    markdown.write(res, {}, {}, out)
    rep = read(out)
    check("### live = 64" in rep and "### live = 1024" in rep, "report.md: a churn section per live size")


def case_report_charts(tmp):
    from report import charts
    if not charts.available():
        print("SKIP: matplotlib is not installed (apt-get install python3-matplotlib)")
        return SKIP
    out = os.path.join(tmp, "res")
    os.makedirs(out)
    write_csv(os.path.join(out, "results.csv"), synthetic_rows(with_live=True))
    r = subprocess.run([PY, os.path.join(BENCH, "report", "make_report.py"), out],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "make_report.py exits 0")
    rep = read(os.path.join(out, "report.md"))
    pngs = sorted(f for f in os.listdir(out) if f.endswith(".png"))
    check(len(pngs) >= 1, "PNG charts written: %s" % ", ".join(pngs))
    for want in ("churn_surface_spry.png", "churn_live64_surfaces.png",
                 "churn_live64_relative.png", "churn_live1024_relative.png", "objects.png",
                 "summary_relative.png"):
        check(want in pngs, want + " drawn")
    check(all(os.path.getsize(os.path.join(out, p)) > 1000 for p in pngs), "PNGs are not empty")
    check("## Summary: spry versus each peer (geometric means)" in rep, "report has the summary")
    check(re.search(r"\| kind=list threads=4 subpools=4 \|.*\*\*FAILED 4\.00 \u25b2\*\*", rep),
          "the FAILED cell is marked in its table, with its penalty ratio")
    sec = rep.split("### live = 1024")[1].split("## ")[0]
    check("![churn_live1024_relative.png](churn_live1024_relative.png)" in sec,
          "each live size's section shows its own heatmaps")
    check("**timeout**" in rep, "the timed-out run is in the report")


# ---- server cases -----------------------------------------------------------------

def start_server(binary, threads=2):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    p = subprocess.Popen([binary, "--port", "0", "--threads", str(threads)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    line = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and b"\n" not in line:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            chunk = os.read(p.stdout.fileno(), 1024)
            if not chunk:
                break
            line += chunk
    m = re.search(rb"READY port=(\d+) allocator=(\S+)", line)
    if not m:
        p.kill()
        raise Fail("server did not print READY: %r / %r" % (line, p.stderr.read()))
    print("ok: server started: " + line.decode().strip())
    return p, int(m.group(1)), m.group(2).decode()


def get(conn, path, cookie=None, method="GET"):
    headers = {"Accept-Encoding": "gzip"}
    if cookie:
        headers["Cookie"] = cookie
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    return resp, body


def case_server(tmp, binary):
    p, port, alloc = start_server(binary)
    try:
        check(alloc == "glibc", "the server detects the allocator (glibc without preload)")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        resp, body = get(c, "/form1?x=1&name=a%20b")
        check(resp.status == 200, "GET /form1 answers 200")
        check(resp.getheader("Content-Encoding") == "gzip", "Content-Encoding: gzip")
        html = gzip.decompress(body).decode()
        check(html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"),
              "the gzip body decodes to a whole HTML page (%d -> %d bytes)" % (len(body), len(html)))
        check(html.count("<tr class=") == 48 and 'data-row="47"' in html,
              "the page has a table of 48 rows")
        check("?name=a b" in html, "query parameters are parsed and decoded")
        cookie = resp.getheader("Set-Cookie") or ""
        m = re.match(r"SID=([0-9a-f]+);", cookie)
        check(m is not None, "a new session gets a cookie: " + cookie)
        sid = "SID=" + m.group(1)
        resp, body = get(c, "/form2", cookie=sid)       # same connection: keep-alive
        html = gzip.decompress(body).decode()
        check(resp.status == 200 and "hit 2 of this session" in html and "Form 2 of session" in html,
              "the second request on the keep-alive connection finds the session (hit 2)")
        check(resp.getheader("Set-Cookie") is None, "a known session gets no new cookie")
        resp, body = get(c, "/", cookie="SID=client-chosen_1")
        html = gzip.decompress(body).decode()
        check("session client-chosen_1" in html, "a client-named session is adopted")
        resp, body = get(c, "/form1", method="HEAD")
        check(resp.status == 200 and body == b"" and int(resp.getheader("Content-Length")) > 0,
              "HEAD answers headers only")
        resp, body = get(c, "/form1", method="POST")
        check(resp.status == 405, "POST answers 405")
        resp, body = get(c, "/stats")
        check(resp.status == 200 and body.startswith(b"requests="), "/stats answers: %r" % body)
        c.close()

        # Pipelining: three requests in one write, three answers in order.
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        req = b"".join(b"GET /form%d HTTP/1.1\r\nHost: x\r\nCookie: SID=pipe\r\n\r\n" % (i % 2 + 1)
                       for i in range(3))
        s.sendall(req + b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        check(data.count(b"HTTP/1.1 200 OK") == 4, "4 pipelined requests, 4 answers, then close")

        # The client sends 200 requests and closes its side: all are answered.
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /form1 HTTP/1.1\r\nHost: x\r\nCookie: SID=half\r\n\r\n" * 200)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        s.close()
        check(data.count(b"HTTP/1.1 200 OK") == 200,
              "200 pipelined requests then a half-close: 200 answers, then close")

        # A malformed request: 400 and the connection is closed.
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GARBAGE\r\n\r\n")
        data = s.recv(4096)
        check(data.startswith(b"HTTP/1.1 400"), "a malformed request gets 400")
        check(s.recv(4096) == b"", "and the connection is closed")
        s.close()

        # Concurrent clients, each with its own session.
        errors = []

        def client(k):
            try:
                cc = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                for i in range(25):
                    r, b = get(cc, "/form%d" % (i % 2 + 1), cookie="SID=user%d" % k)
                    h = gzip.decompress(b).decode()
                    if r.status != 200 or ("hit %d of" % (i + 1)) not in h:
                        errors.append((k, i, r.status))
                        return
                cc.close()
            except Exception as e:      # noqa: BLE001
                errors.append((k, repr(e)))

        ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(not errors, "8 concurrent keep-alive clients x 25 requests, sessions counted right %s"
              % (errors[:3] or ""))
        check(p.poll() is None, "the server is still running")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "hung"
    check(rc == 0, "the server exits 0 on SIGTERM (got %s)" % rc)


def case_server_sigterm(tmp, binary):
    p, port, _ = start_server(binary, threads=3)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    resp, body = get(c, "/")
    check(resp.status == 200, "answers before the signal")
    half = socket.create_connection(("127.0.0.1", port), timeout=5)
    half.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")      # an incomplete request
    time.sleep(0.2)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise Fail("the server did not stop within 5 s of SIGTERM")
    err = p.stderr.read().decode()
    check(rc == 0, "exit status 0 after SIGTERM with 7 connections open (%.2f s)"
          % (time.monotonic() - t0))
    check("stopped after" in err, "it says so on stderr: " + err.strip())
    for s in idle + [half]:
        s.close()
    c.close()
    p2, port2, _ = start_server(binary, threads=1)
    p2.send_signal(signal.SIGINT)
    check(p2.wait(timeout=5) == 0, "SIGINT stops it too")


CASES = {
    "missing_allocator": case_missing_allocator,
    "corrupt": case_corrupt,
    "mismatch": case_mismatch,
    "missing_program": case_missing_program,
    "plan": case_plan,
    "aggregate": case_aggregate,
    "failures": case_failures,
    "churn_grid": case_churn_grid,
    "report_charts": case_report_charts,
    "server": case_server,
    "server_sigterm": case_server_sigterm,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in CASES:
        print("usage: selftest.py CASE [ARG]\ncases: " + ", ".join(CASES))
        return 2
    tmp = tempfile.mkdtemp(prefix="bench-selftest-")
    try:
        rc = CASES[argv[1]](tmp, *argv[2:])
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if rc == SKIP:
        return SKIP
    print("PASS: " + argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""What the benchmark suite knows about its tests and metrics.

Shared by the runner (bench/run.py) and the report (bench/report/): which
metric of a test is its headline, which way is better, how a test is drawn.
The CSV carries everything else, so a report can be rebuilt from a CSV alone.
"""

# Allocators in the order they are run and shown. glibc is the baseline
# (nothing preloaded); spry is the one under test.
ALLOCATORS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "spry"]
SUBJECT = "spry"

# How far a ratio may sit above 1 before a cell counts as a loss for spry.
# Seed 003: "do not consider performance differences inferior to 5%".
LOSS_MARGIN = 1.05

# Per test: title, seed, headline metric, what a row is, how to chart it.
#   primary   the metric the speed ratio uses
#   chart     "surface" (churn), "lines" (x = one param, a panel per the
#             others), or "bars" (a group of bars per cell)
#   x         for "lines": the param on the x axis
#   panel     for "lines": the params that split panels
#   peers     False when only one allocator can run it (frag32)
TESTS = {
    "churn": dict(
        title="Churn surface", seed="000, BigBrain 2020", primary="mops",
        chart="surface",
        what="Each thread mallocs and frees blocks of random size in a band for a fixed "
             "time, checking every block's contents before free; millions of "
             "malloc/free pairs per second, summed over threads."),
    "shrink_realloc": dict(
        title="Shrink-realloc", seed="000, comment 3", primary="seconds", chart="bars",
        what="N strings grown to 20,000 bytes, one byte touched per 4 KiB, shrunk to "
             "1 byte, all kept; repeated L times. Time and peak RSS."),
    "objects": dict(
        title="Objects", seed="000, comment 4", primary="total_s", chart="bars",
        extra=["alloc_s", "free_s"],
        what="One thread allocates millions of small objects with string fields, then "
             "frees them. total_s = alloc_s + free_s."),
    "strbuild": dict(
        title="String building", seed="001, Memory Managers and String Building",
        primary="seconds", chart="lines", x="threads", panel=["builder"],
        what="Four string builders (naive realloc per piece, geometric builder, "
             "write-only block stream, preallocated text writer), 1..12 threads at once."),
    "chunks": dict(
        title="Chunk-size speed", seed="002, malloc & free speed", primary="seconds",
        chart="bars", extra=["mops"],
        what="Fixed number of malloc/free pairs per thread for the seed's chunk-size "
             "ranges and thread counts; wall time."),
    "frag": dict(
        title="Fragmentation robustness", seed="002, allocate without deallocation",
        primary="seconds", chart="bars", extra=["big_ok", "small_fail"],
        what="Threads allocate many blocks of 128 B..max without freeing (optionally "
             "punching holes), then one 8 MiB block is requested (big_ok = it succeeded)."),
    "frag32": dict(
        title="Fragmentation robustness, 32-bit", seed="002, its x86 runs", primary="seconds",
        chart="bars", peers=False, extra=["big_ok", "small_fail"],
        what="The fragmentation test built with -m32, where the seed's CRT heap ran out "
             "of address space. Runs without preload only (no 32-bit peers or spry)."),
    "pools": dict(
        title="Object pools", seed="002, pools of objects", primary="seconds",
        chart="lines", x="subpools", panel=["kind", "threads"],
        what="A pool of objects kept in a std::list versus an intrusive list, one pool "
             "versus 4..64 sub-pools, 4/8/16 threads."),
    "server": dict(
        title="Server capacity", seed="003, IntraWeb under JMeter",
        primary="requests_per_s", chart="bars",
        extra=["requests", "latency_p50_ms", "latency_p99_ms", "errors"],
        what="Our HTTP/1.1 server (parse into malloc'd structures, find and lock the "
             "session, render an HTML page by string building, gzip it, answer) driven "
             "by wrk with 100 connections; requests/s and the server's peak RSS (VmHWM)."),
}

TEST_ORDER = list(TESTS)

HIGHER_IS_BETTER = {"mops", "ops", "requests_per_s", "requests", "big_ok"}
# Shown, but not a speed: no "better" direction is claimed for these.
NEUTRAL = {"requests", "small_fail", "errors"}
UNITS = {
    "mops": "Mops/s", "seconds": "s", "total_s": "s", "alloc_s": "s", "free_s": "s",
    "requests_per_s": "req/s", "maxrss_kb": "KiB", "latency_p50_ms": "ms",
    "latency_p99_ms": "ms",
}


def better(metric):
    """'higher' or 'lower': which direction is good for this metric."""
    return "higher" if metric in HIGHER_IS_BETTER else "lower"


def test_info(test):
    info = dict(TESTS.get(test, {}))
    info.setdefault("title", test)
    info.setdefault("seed", "")
    info.setdefault("primary", None)
    info.setdefault("chart", "bars")
    info.setdefault("what", "")
    info.setdefault("peers", True)
    info.setdefault("extra", [])
    return info


def format_params(params):
    """{'threads': 4, 'min': 8} -> 'threads=4;min=8' (the CSV's params column)."""
    return ";".join("%s=%s" % (k, v) for k, v in params.items())


def parse_params(text):
    out = {}
    for part in (text or "").split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


def num(v):
    """A param value as a number when it is one (for sorting and axes)."""
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v


def size_label(n):
    n = int(n)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n

"""What the benchmark suite knows about its tests and metrics.

Shared by the runner (bench/run.py) and the report (bench/report/): which
metric of a test is its headline, which way is better, how a test is drawn.
The CSV carries everything else, so a report can be rebuilt from a CSV alone.
"""

# Allocators in the order they are run and shown. glibc is the baseline
# (nothing preloaded); spry is the one under test.
ALLOCATORS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "spry"]
SUBJECT = "spry"
# The Pascal tests' memory managers, compiled into their programs: the Free
# Pascal RTL's heap, the cmem unit (glibc's malloc) and the spry unit.
PASCAL_ALLOCATORS = ["fpc-rtl", "cmem", "spry"]
# Every allocator name, in the order tables and charts show them.
ORDER = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "fpc-rtl", "cmem", "spry"]

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
#   group     a param that splits the test into sections, each with its own
#             tables and charts (churn: live); group_default for rows
#             without it (results of older runs)
TESTS = {
    "churn": dict(
        title="Churn surface and working sets", seed="000, BigBrain 2020; issue 8",
        primary="mops", chart="surface", group="live", group_default="64",
        what="Each thread mallocs and frees blocks of random size in a band for a fixed "
             "time, keeping about `live` blocks allocated (one malloc or free per step at "
             "a random slot), checking every block's contents before free; millions of "
             "malloc/free pairs per second, summed over threads. One section per working "
             "set: 64 live blocks per thread (the seed's surface: every block in cache) "
             "and 1,024 and 4,096 (issue 8: the heap no longer fits in cache)."),
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
    "prodcons": dict(
        title="Producer/consumer", seed="issue 8", primary="mops", chart="bars",
        extra=["held_max", "held_mean"],
        what="Half the threads malloc blocks of random size and pass them through bounded "
             "lock-free rings to the other half, which check and free them: every block is "
             "freed by a thread other than its allocator's. Millions of blocks handed over "
             "per second, and peak RSS. held_max and held_mean: blocks in the rings (allocated, "
             "not yet freed), sampled every millisecond; a faster producer fills its rings, so "
             "peak RSS compares fairly only beside the blocks each allocator had live."),
    "relay": dict(
        title="Threads that come and go", seed="issue 8 (Larson and Krishnan's server test)",
        primary="mops", chart="bars",
        what="Each of `threads` lanes holds 1,000 blocks of 8 B-1 KiB; its thread frees and "
             "mallocs at random slots for 10,000 steps, then starts the lane's next thread "
             "and exits, which frees the blocks the threads before it allocated. Millions of "
             "steps per second, and peak RSS: memory that stays with threads that left."),
    "exchange": dict(
        title="Threads that hand blocks over", seed="issue 8 (in the manner of mimalloc's stress test)",
        primary="mops", chart="bars",
        what="Rounds of `threads` threads, each doing 10,000 steps: malloc (60%), check and free "
             "one of its blocks (25%), or swap one with a random slot of a shared array (15%), "
             "taking what another thread, maybe one that has exited, left there. Sizes 90% "
             "8-128 B, 9% up to 8 KiB, 1% up to 400 KiB. Millions of steps per second, and peak "
             "RSS: memory freed by other threads and by threads that left must be reused."),
    "mixed": dict(
        title="Mixed sizes, large live set", seed="issue 8", primary="seconds", chart="bars",
        extra=["fill_s", "steps_s", "free_s"],
        what="One thread keeps hundreds of thousands of live blocks of 8 B-64 KiB (skewed to "
             "small sizes) and mallocs or frees one at a random slot per step. seconds = "
             "fill + steps + free of the live set."),
    "large": dict(
        title="Large-block loop", seed="issue 8", primary="seconds", chart="bars",
        what="Blocks of 256 KiB-32 MiB allocated, written on every page, checked and freed, "
             "a few live per thread; wall time of the steps and peak RSS."),
    "turns": dict(
        title="Threads that take turns", seed="issue 8 (memory never given back, across threads)",
        primary="seconds", chart="bars",
        what="Threads, all alive, work one at a time: each mallocs 32 MiB of blocks in the band, "
             "writes every page, checks and frees them, then wakes the next (a pipeline whose "
             "stages run in different threads). Wall time and peak RSS: what one thread freed "
             "must serve the next thread's blocks, or the process holds a working set per thread."),
    "pascal_shrink": dict(
        title="Pascal: shrink strings", seed="000, comment 3 (in Free Pascal)",
        primary="seconds", chart="bars", pascal=True,
        what="Pavel's MMTest in Free Pascal: N AnsiStrings, each SetLength'd to 20,000 "
             "bytes, touched every 4 KiB, SetLength'd to 1 byte, all kept; repeated L "
             "times. Time and peak RSS."),
    "pascal_objects": dict(
        title="Pascal: objects with string fields", seed="000, comment 4 (in Free Pascal)",
        primary="total_s", chart="bars", extra=["alloc_s", "free_s"], pascal=True,
        what="One thread creates millions of small objects (a class with three string "
             "fields and numbers), assigns strings built with IntToStr to them, then frees "
             "them all. total_s = alloc_s + free_s."),
    "pascal_strbuild": dict(
        title="Pascal: string building", seed="001, Memory Managers and String Building "
        "(in Free Pascal)", primary="seconds", chart="lines", x="threads",
        panel=["builder"], pascal=True,
        what="The seed's four builders in Free Pascal, 1..12 TThreads at once: trivial "
             "(s := s + piece), TStringBuilder, a write-only block stream (4 KiB blocks), "
             "a text writer (64 KiB buffer flushed into a TMemoryStream)."),
    "pascal_churn": dict(
        title="Pascal: TThread churn", seed="000, BigBrain's surface (in Free Pascal)",
        primary="mops", chart="lines", x="threads", panel=["band"], pascal=True,
        what="TThreads each GetMem and FreeMem blocks of random size in a band at random "
             "slots of 64 live blocks, checking them before the FreeMem; millions of pairs "
             "per second, summed over threads."),
    "pascal_calls": dict(
        title="Pascal: cost per call", seed="issue 10 (MemSize no slower than from C)",
        primary="memsize_ns", chart="bars", extra=["pair_ns", "c_usable_ns", "c_pair_ns"],
        pascal=True,
        what="MemSize over 1024 live blocks and GetMem/FreeMem pairs of 32 bytes, called "
             "from Pascal through the RTL (System.MemSize -> MemoryManager.MemSize); in the "
             "spry build the same loops in C (spry_usable_size, spry_malloc/spry_free) run "
             "alternating in the same process (c_usable_ns, c_pair_ns). ns per call, medians."),
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
    "requests_per_s": "req/s", "memsize_ns": "ns", "pair_ns": "ns",
    "c_usable_ns": "ns", "c_pair_ns": "ns", "maxrss_kb": "KiB", "latency_p50_ms": "ms",
    "latency_p99_ms": "ms", "held_max": "blocks", "held_mean": "blocks",
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
    info.setdefault("group", None)
    info.setdefault("group_default", "")
    info.setdefault("pascal", False)
    return info


def origin(info):
    """Where a test comes from, for its heading: "seed 000, ..." or "issue 8"."""
    s = info.get("seed", "")
    return s if s.startswith("issue") else "seed " + s


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

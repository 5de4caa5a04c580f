#!/usr/bin/python3
"""spry's benchmark suite: every test of issues 3 and 8 against every allocator.

    /usr/bin/python3 bench/run.py --quick            # < 10 minutes on 2 cores
    /usr/bin/python3 bench/run.py --full             # the seeds' sizes (hours)
    /usr/bin/python3 bench/run.py --churn-table      # issue 8's churn grid only
    /usr/bin/python3 bench/run.py --quick --only churn --allocators glibc,spry
    /usr/bin/python3 bench/run.py --dry-run --full   # the plan and its time estimate

The same binaries (<build>/bench/) run under every allocator, chosen by
LD_PRELOAD (glibc: nothing preloaded). Each program reports which allocator
it found mapped; a run whose allocator is not the one preloaded is flagged
"mismatch" and kept out of the numbers. Runs alternate allocators cell by cell
(A B C D E, then the next repeat starting one further along), so machine drift
hits every allocator alike; repeats give a median and a spread.

Output in results/<YYYY-MM-DD_HHMMSS>/: results.csv (every measurement,
failed runs included), meta.json, runs.log (every command run), logs/ (the
output of runs that failed), report.md and PNG charts.

Exit status: 0 done (failed cells are in the report), 3 when some run found
corrupted memory (CORRUPT: an allocator bug), 1 when nothing could run,
2 bad arguments, 130 interrupted (the partial report is still written).

Python 3 standard library only; matplotlib for the charts (optional).
"""
import argparse
import csv
import datetime
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)

from report import aggregate, markdown, suite  # noqa: E402

# ---- allocators --------------------------------------------------------------

# name -> (library file names to look for, Debian package)
PEERS = {
    "jemalloc": (["libjemalloc.so.2"], "libjemalloc2"),
    "tcmalloc": (["libtcmalloc_minimal.so.4", "libtcmalloc.so.4"], "libtcmalloc-minimal4"),
    "mimalloc": (["libmimalloc.so.2", "libmimalloc.so.2.0", "libmimalloc.so"], "libmimalloc2.0"),
}


class Allocator:
    def __init__(self, name, path, used, reason=""):
        self.name, self.path, self.used, self.reason = name, path, used, reason
        # What the benchmark programs report finding mapped: an allocator
        # added with --lib (say another build of spry, to compare two
        # commits side by side) is known by its library's file name.
        self.family = name
        if name not in suite.ALLOCATORS and path:
            base = os.path.basename(path)
            self.family = next((a for a in suite.ALLOCATORS if a in base), name)

    def env(self, base):
        env = dict(base)
        env.pop("LD_PRELOAD", None)
        if self.path:
            env["LD_PRELOAD"] = self.path
        return env

    def as_meta(self):
        return {"name": self.name, "path": self.path, "used": self.used, "reason": self.reason}


def lib_dirs():
    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    for d in ("/usr/lib/" + multiarch, "/lib/" + multiarch, "/usr/lib", "/usr/local/lib",
              "/usr/lib64"):
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def find_peer(name):
    """The peer's shared library, or (None, why not)."""
    files, package = PEERS[name]
    for d in lib_dirs():
        for f in files:
            p = os.path.join(d, f)
            if os.path.exists(p):
                return os.path.realpath(p), ""
    # Not where expected: ask dpkg what the package shipped.
    try:
        out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True,
                             timeout=20).stdout
        stem = files[0].split(".so")[0] + ".so"
        for line in out.splitlines():
            base = os.path.basename(line)
            if base.startswith(stem) and "_debug" not in base and os.path.isfile(line):
                return os.path.realpath(line), ""
    except (OSError, subprocess.SubprocessError):
        pass
    return None, "not installed (Debian package %s; scripts/install-peers.sh installs it)" % package


def discover_allocators(args):
    """All five, in the suite's order, each marked used or skipped with why."""
    overrides = {}
    for spec in args.lib:
        if "=" not in spec:
            sys.exit("run.py: --lib wants NAME=PATH, got %r" % spec)
        name, path = spec.split("=", 1)
        overrides[name] = path
    wanted = [a.strip() for a in args.allocators.split(",")] if args.allocators else None
    names = list(suite.ALLOCATORS) + [n for n in overrides if n not in suite.ALLOCATORS]
    out = []
    for name in names:
        if wanted is not None and name not in wanted:
            out.append(Allocator(name, None, False, "not selected (--allocators)"))
            continue
        if name == "glibc" and name not in overrides:
            out.append(Allocator(name, None, True))
            continue
        if name in overrides:
            path, why = overrides[name], "no such file: %s (given with --lib)" % overrides[name]
        elif name == suite.SUBJECT:
            path = os.path.join(args.build, "libspry.so")
            why = "%s does not exist (build spry first: make build)" % path
        else:
            path, why = find_peer(name)
        if path and os.path.isfile(path):
            out.append(Allocator(name, os.path.abspath(path), True))
        else:
            out.append(Allocator(name, None, False, why))
    if wanted:
        unknown = [w for w in wanted if w not in names and w not in PASCAL_ALLOCATORS]
        if unknown:
            sys.exit("run.py: unknown allocator(s) %s (known: %s)"
                     % (", ".join(unknown), ", ".join(names)))
    return out


# ---- the plan: tests and their cells -------------------------------------------

class Cell:
    """One configuration of one test, run under every allocator."""

    def __init__(self, test, label, params, program, args, est, only=None, timeout=None,
                 variants=None):
        self.test = test
        self.label = label              # shown in tables: "threads=4 band=8-32B"
        self.params = params            # every argument, for the CSV
        self.program = program          # file name in the bench directory
        self.args = [str(a) for a in args]
        self.est = est                  # expected seconds per run (progress estimate)
        self.only = only                # allocators allowed (frag32: glibc only)
        self.timeout = timeout or max(60.0, 30.0 * est)
        # Pascal tests: one binary per allocator, the memory manager compiled
        # in (nothing preloaded): {allocator: program file}
        self.variants = variants


# Metrics read from each program's RESULT line; the first is required.
METRICS = {
    "churn": ["mops", "ops", "calls"],
    "shrink_realloc": ["seconds", "free_s"],
    "objects": ["alloc_s", "free_s"],
    "strbuild": ["seconds"],
    "chunks": ["seconds", "mops"],
    "frag": ["seconds", "big_ok", "small_fail", "big_fail", "loop_s", "free_s", "big_s",
             "alloc_mb"],
    "pools": ["seconds", "mops"],
    "prodcons": ["mops", "ops", "seconds", "held_mean", "held_max"],
    "mixed": ["seconds", "fill_s", "steps_s", "free_s", "mops", "live_mib"],
    "relay": ["mops", "ops", "generations", "seconds"],
    "exchange": ["mops", "ops", "seconds"],
    "large": ["seconds", "mops", "gib"],
    "turns": ["seconds", "ops"],
    "pascal_shrink": ["seconds"],
    "pascal_objects": ["total_s", "alloc_s", "free_s"],
    "pascal_strbuild": ["seconds"],
    "pascal_churn": ["mops", "seconds"],
    "pascal_calls": ["memsize_ns", "pair_ns", "c_usable_ns", "c_pair_ns"],
}
METRICS["frag32"] = METRICS["frag"]

CHURN_THREADS = [1, 2, 4, 8, 16, 32, 64]
# 9 bands from 8 B to 1 MiB, a factor of 4 each (the 128-256 KiB band keeps
# the seed's 256 KiB top on its own).
CHURN_BANDS = [(8, 32), (32, 128), (128, 512), (512, 2048), (2048, 8192), (8192, 32768),
               (32768, 131072), (131072, 262144), (262144, 1048576)]
# The working-set axis (issue 8): live blocks per thread.
CHURN_LIVE = [64, 1024, 4096]
# Issue 2's table, and issue 8's grid of targets (x CHURN_LIVE).
CHURN_TABLE_BANDS = [(16, 128), (128, 4096), (4096, 65536), (65536, 524288)]
CHURN_TABLE_THREADS = [1, 2, 8, 64]
# One malloc or free per step over 2 x live slots (see churn.c), after one
# untimed pass over the slots.
CHURN_PATTERN, CHURN_WARMUP = "steps", 1
# Seed 002's speed table: (largest chunk, threads, operations per thread).
CHUNK_CELLS = [(512, 4, 10_000_000), (2048, 8, 5_000_000), (32768, 10, 1_000_000),
               (131072, 12, 200_000), (524288, 14, 50_000), (2097152, 16, 20_000)]
# Seed 002's fragmentation table: (threads, pointers per thread, largest block).
FRAG_CELLS = [(2, 2_000_000, 256), (4, 800_000, 512), (8, 200_000, 1024),
              (10, 50_000, 1280), (12, 15_000, 1536)]
# Seed 002's pools: threads -> operations per thread.
POOL_THREADS = [(4, 1_000_000), (8, 1_000_000), (16, 300_000)]
POOL_SUBPOOLS = [1, 4, 8, 16, 32, 64]

SEED = 1
SERVER_CONNECTIONS = 100        # seed 003: 100 JMeter threads
SERVER_REQUESTS = 201_000       # seed 003: 201,000 requests


def short_size(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return "%dB" % n


def band_label(lo, hi):
    a, b = short_size(lo), short_size(hi)
    if a[-1] == b[-1]:
        return "%s-%s" % (a[:-1], b)
    return "%s-%s" % (a, b)


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


def churn_budget():
    """Bytes a churn cell's live set may hold: half the machine's RAM (so
    the cell fits whatever an allocator adds, and under the runner's RSS
    limit of 85%)."""
    return mem_total_kb() * 1024 // 2


def churn_cells(grid, budget, notes=None):
    """Cells for grid = [(live, bands, threads, seconds)]. A cell whose
    nominal live set (threads x live x the band's mean size) passes the
    budget runs with fewer live blocks per thread, as many as fit; its label
    says so ("live=4096->669") and notes gets a line for it."""
    cells = []
    for live, bands, threads, seconds in grid:
        for lo, hi in bands:
            for t in threads:
                band = band_label(lo, hi)
                mean = (lo + hi) / 2.0
                nominal = t * live * mean
                run_live = live
                if nominal > budget:
                    run_live = max(1, int(budget // (t * mean)))
                    if notes is not None:
                        notes.append("**Scaled down**: live=%d threads=%d band=%s would hold "
                                     "%s (%d x %d blocks of %s on average), more than the %s "
                                     "allowed (half the RAM); it ran with %d live blocks per "
                                     "thread (%s) and is labelled live=%d->%d."
                                     % (live, t, band, fmt_bytes(nominal), t, live,
                                        fmt_bytes(mean), fmt_bytes(budget), run_live,
                                        fmt_bytes(t * run_live * mean), live, run_live))
                live_txt = "%d" % live if run_live == live else "%d->%d" % (live, run_live)
                blocks = t * run_live
                # Fill, warm-up and teardown: about a microsecond per block,
                # more where every block faults in fresh pages.
                extra = blocks * (0.4e-6 + 2.5e-6 * min(mean, 8192.0) / 4096.0)
                cells.append(Cell("churn", "live=%s threads=%d band=%s" % (live_txt, t, band),
                                  {"live": live, "live_run": run_live, "threads": t,
                                   "band": band, "min": lo, "max": hi, "seconds": seconds,
                                   "pattern": CHURN_PATTERN, "warmup": CHURN_WARMUP,
                                   "seed": SEED},
                                  "churn", ["--threads", t, "--min", lo, "--max", hi,
                                            "--live", run_live, "--pattern", CHURN_PATTERN,
                                            "--warmup", CHURN_WARMUP, "--seconds", seconds,
                                            "--seed", SEED],
                                  est=seconds + 0.03 + 0.002 * t + extra,
                                  timeout=seconds + 120 + 60 * extra))
    return cells


def churn_notes(grid, scaled):
    out = ["Each cell: an untimed warm-up of one step per slot, then the timed run; pattern "
           "%s: one malloc or free per step at a random one of 2 x live slots, so about live "
           "blocks per thread stay allocated (issue 8; the seed ran 8 s per cell); seed %d."
           % (CHURN_PATTERN, SEED)]
    for live, bands, threads, secs in grid:
        out.append("live=%d: %s s per cell; bands %s; threads %s." % (
            live, secs, ", ".join(band_label(*b) for b in bands), ",".join(map(str, threads))))
    return out + scaled


def churn_grid(mode, seconds=None):
    """[(live, bands, threads, seconds per cell)] of a mode's churn cells;
    seconds, when given, replaces the mode's durations."""
    if mode == "quick":     # the seed's surface at 64 live blocks, issue 8's grid above it
        grid = [(64, CHURN_BANDS, CHURN_THREADS, 0.3)] + \
               [(live, CHURN_TABLE_BANDS, CHURN_TABLE_THREADS, 0.4) for live in CHURN_LIVE[1:]]
    elif mode == "full":
        grid = [(live, CHURN_BANDS, CHURN_THREADS, 8.0) for live in CHURN_LIVE]
    else:                   # churn-table
        grid = [(live, CHURN_TABLE_BANDS, CHURN_TABLE_THREADS, 1.0) for live in CHURN_LIVE]
    return [(live, b, t, seconds or secs) for live, b, t, secs in grid]


def plan(mode, server_threads, notes, churn_seconds=None):
    """Every cell of every test, for mode 'quick' or 'full'. notes[test]
    collects what the report should say about sizes and scaling.
    churn_seconds replaces the churn cells' durations (--seconds)."""
    quick = mode == "quick"
    cells = []

    grid = churn_grid(mode, churn_seconds)
    scaled = []
    cells += churn_cells(grid, churn_budget(), scaled)
    notes["churn"] = churn_notes(grid, scaled)

    count, loops = (1_000_000, 3) if quick else (3_000_000, 10)
    cells.append(Cell("shrink_realloc", "count=%d loops=%d" % (count, loops),
                      {"count": count, "loops": loops, "size": 20000, "stride": 4096, "shrink": 1},
                      "shrink_realloc", ["--count", count, "--loops", loops],
                      est=0.1e-6 * count * loops + 0.05))
    if quick:
        notes["shrink_realloc"] = ["Quick size: %d strings x %d loops (the seed: 3,000,000 x 10)."
                                   % (count, loops)]

    count = 2_000_000 if quick else 10_000_000
    cells.append(Cell("objects", "count=%d" % count, {"count": count, "seed": SEED},
                      "objects", ["--count", count, "--seed", SEED],
                      est=0.5e-6 * count + 0.05))

    threads = [1, 2, 4, 8, 12] if quick else list(range(1, 13))
    pieces, repeat = (10_000, 100) if quick else (10_000, 1000)
    for b in ["naive", "geometric", "blocks", "writer"]:
        for t in threads:
            cells.append(Cell("strbuild", "builder=%s threads=%d" % (b, t),
                              {"builder": b, "threads": t, "pieces": pieces, "repeat": repeat},
                              "strbuild", ["--builder", b, "--threads", t, "--pieces", pieces,
                                           "--repeat", repeat],
                              est=0.03e-6 * pieces * repeat * t + 0.03))
    notes["strbuild"] = ["%d pieces per string, %d strings per thread, threads %s."
                         % (pieces, repeat, ",".join(map(str, threads)))]

    scale = 4 if quick else 1
    for mx, t, ops in CHUNK_CELLS:
        n = max(1, ops // scale)
        cells.append(Cell("chunks", "256B-%s threads=%d" % (short_size(mx), t),
                          {"min": 256, "max": mx, "threads": t, "ops": n, "seed": SEED},
                          "chunks", ["--min", 256, "--max", mx, "--threads", t, "--ops", n,
                                     "--seed", SEED],
                          est=n * t * (60e-9 + 2e-12 * mx) + 0.03))
    notes["chunks"] = ["Operations per thread: the seed's counts%s." % (
        " divided by %d (quick mode)" % scale if scale > 1 else "")]

    scale, loops = (2, 1) if quick else (1, 3)
    for prog in ("frag", "frag32"):
        for t, ptrs, mx in FRAG_CELLS:
            n = max(1, ptrs // scale)
            for holes in (0, 1):
                cells.append(Cell(prog, "threads=%d ptrs=%d 128B-%s holes=%d" % (t, n, short_size(mx), holes),
                                  {"threads": t, "pointers": n, "min": 128, "max": mx,
                                   "holes": holes, "big": 8388608, "loops": loops, "seed": SEED},
                                  prog, ["--threads", t, "--pointers", n, "--min", 128, "--max", mx,
                                         "--holes", holes, "--big", 8388608, "--loops", loops,
                                         "--seed", SEED],
                                  est=n * t * loops * 0.15e-6 + 0.05,
                                  only=["glibc"] if prog == "frag32" else None))
    notes["frag"] = ["The seed's cells, pointers per thread%s, %d loop(s), each loop ending "
                     "with an 8 MiB request." % (" divided by %d (quick mode)" % scale
                                                 if scale > 1 else "", loops)]
    notes["frag32"] = list(notes["frag"])

    scale = 2 if quick else 1
    for kind in ("list", "intrusive"):
        for t, ops in POOL_THREADS:
            n = max(1, ops // scale)
            for k in POOL_SUBPOOLS:
                cells.append(Cell("pools", "kind=%s threads=%d subpools=%d" % (kind, t, k),
                                  {"kind": kind, "subpools": k, "threads": t, "ops": n, "seed": SEED},
                                  "pools", ["--kind", kind, "--subpools", k, "--threads", t,
                                            "--ops", n, "--seed", SEED],
                                  est=n * t * 0.03e-6 + 0.03))
    notes["pools"] = ["Operations per thread: the seed's (1M, 1M, 300k for 4, 8, 16 threads)%s."
                      % (" divided by %d (quick mode)" % scale if scale > 1 else "")]

    # Issue 8: producer/consumer, mixed sizes, large blocks.
    secs = 1.0 if quick else 5.0
    pc_threads = [2, 8] if quick else [2, 4, 8, 16, 32]
    pc_bands = [(8, 4096)] if quick else [(8, 4096), (4096, 65536)]
    ring = 256
    for lo, hi in pc_bands:
        for t in pc_threads:
            p, c = t // 2, t - t // 2
            cells.append(Cell("prodcons", "threads=%d (%d+%d) band=%s" % (t, p, c, band_label(lo, hi)),
                              {"threads": t, "producers": p, "consumers": c, "band": band_label(lo, hi),
                               "min": lo, "max": hi, "ring": ring, "seconds": secs, "seed": SEED},
                              "prodcons", ["--producers", p, "--consumers", c, "--min", lo,
                                           "--max", hi, "--ring", ring, "--seconds", secs,
                                           "--seed", SEED],
                              est=secs + 0.05, timeout=secs + 120))
    notes["prodcons"] = ["%s s per cell; half the threads produce, half consume; one ring of %d "
                         "blocks per producer-consumer pair; bands %s." % (
                             secs, ring, ", ".join(band_label(*b) for b in pc_bands))]

    # threads that come and go, each taking over its predecessor's blocks
    rl_threads = [2, 8] if quick else [2, 4, 8, 16, 32]
    rl_live, rl_steps, rl_band = 1000, 10_000, (8, 1000)
    for t in rl_threads:
        cells.append(Cell("relay", "threads=%d live=%d steps=%d band=%s" % (
                              t, rl_live, rl_steps, band_label(*rl_band)),
                          {"threads": t, "live": rl_live, "steps": rl_steps,
                           "band": band_label(*rl_band), "min": rl_band[0], "max": rl_band[1],
                           "seconds": secs, "seed": SEED},
                          "relay", ["--threads", t, "--live", rl_live, "--steps", rl_steps,
                                    "--min", rl_band[0], "--max", rl_band[1], "--seconds", secs,
                                    "--seed", SEED],
                          est=secs + 0.1, timeout=secs + 120))
    notes["relay"] = ["%s s per cell; %d live blocks of %s per lane; each thread does %d "
                      "steps, then starts the lane's next thread and exits." % (
                          secs, rl_live, band_label(*rl_band), rl_steps)]

    # threads that come and go and hand blocks to each other (mixed sizes)
    ex_threads = [2, 8] if quick else [2, 4, 8, 16, 32]
    ex_rounds, ex_steps, ex_live, ex_transfer, ex_max = 50, 10_000, 500, 1000, 409_600
    for t in ex_threads:
        cells.append(Cell("exchange", "threads=%d rounds=%d steps=%d" % (t, ex_rounds, ex_steps),
                          {"threads": t, "rounds": ex_rounds, "steps": ex_steps, "live": ex_live,
                           "transfer": ex_transfer, "max": ex_max, "touch": "pages", "seed": SEED},
                          "exchange", ["--threads", t, "--rounds", ex_rounds, "--steps", ex_steps,
                                       "--live", ex_live, "--transfer", ex_transfer,
                                       "--max", ex_max, "--touch", "pages", "--seed", SEED],
                          est=3e-8 * t * ex_rounds * ex_steps + 0.05 * ex_rounds / 10,
                          timeout=300))
    notes["exchange"] = ["%d rounds of threads, each doing %d steps with up to %d live blocks "
                         "(90%% 8-128 B, 9%% 128 B-8 KiB, 1%% 8-%d KiB, each written on every "
                         "page: with only their ends written, memory purged and taken again cost "
                         "a fault or two a block and the RSS counted little of the large blocks) "
                         "and a shared array of %d slots for handing blocks over." % (
                             ex_rounds, ex_steps, ex_live, ex_max // 1024, ex_transfer)]

    mixed_cells = [(500_000, 5_000_000)] if quick else [(100_000, 50_000_000), (1_000_000, 50_000_000)]
    for live, ops in mixed_cells:
        cells.append(Cell("mixed", "live=%d ops=%d" % (live, ops),
                          {"live": live, "ops": ops, "seed": SEED},
                          "mixed", ["--live", live, "--ops", ops, "--seed", SEED],
                          est=0.3e-6 * ops + 0.8e-6 * live + 0.05))
    notes["mixed"] = ["One thread, sizes 8 B-64 KiB skewed to small (half <= 64 B, mean ~590 B): "
                      "%s." % "; ".join("about %d live blocks (~%d MiB), %d steps" % (
                          live, live * 594 // (1 << 20), ops) for live, ops in mixed_cells)]

    # (threads, steps per thread, smallest, largest, live per thread): the
    # issue's loop of 256 KiB-32 MiB, and a wider one of 2-64 MiB at 8 live,
    # where holes left by freed blocks are seldom the size of the next.
    wide = (2 << 20, 64 << 20, 8)
    large_cells = ([(1, 1000, 256 << 10, 32 << 20, 4), (4, 250, 256 << 10, 32 << 20, 4),
                    (1, 1000) + wide] if quick else
                   [(1, 10_000, 256 << 10, 32 << 20, 4), (4, 2_500, 256 << 10, 32 << 20, 4),
                    (16, 625, 256 << 10, 32 << 20, 4), (1, 3_000) + wide, (4, 750) + wide])
    for t, ops, lo, hi, live in large_cells:
        label = "threads=%d ops=%d" % (t, ops)
        if (lo, hi) != (256 << 10, 32 << 20):
            label += " band=%s live=%d" % (band_label(lo, hi), live)
        mean_mib = (hi - lo) / math.log(hi / lo) / (1 << 20)
        cells.append(Cell("large", label,
                          {"threads": t, "live": live, "ops": ops, "min": lo, "max": hi,
                           "dist": "log", "touch": "pages", "seed": SEED},
                          "large", ["--threads", t, "--live", live, "--ops", ops, "--min", lo,
                                    "--max", hi, "--seed", SEED],
                          # half the steps malloc; about 0.3 s per GiB faulted.
                          est=0.3 * t * ops / 2 * mean_mib / 1024 + 0.05))
    notes["large"] = ["Blocks log-uniform in a band, every page written and checked: %s." % "; ".join(
        "%s, about %d live per thread, %d steps at %d thread(s)" % (band_label(lo, hi), live, ops, t)
        for t, ops, lo, hi, live in large_cells)]

    # threads that take turns with a working set each (memory one thread
    # freed must serve the next one's blocks)
    tu_threads = [4, 16] if quick else [4, 16, 64]
    tu_bands = [(1024, 4096), (32768, 262144)]
    tu_set, tu_rounds = 32 << 20, 2
    for lo, hi in tu_bands:
        for t in tu_threads:
            cells.append(Cell("turns", "threads=%d band=%s" % (t, band_label(lo, hi)),
                              {"threads": t, "band": band_label(lo, hi), "min": lo, "max": hi,
                               "set": tu_set, "rounds": tu_rounds, "touch": "pages", "seed": SEED},
                              "turns", ["--threads", t, "--rounds", tu_rounds, "--set", tu_set,
                                        "--min", lo, "--max", hi, "--seed", SEED],
                              # about 0.3 s per GiB written and freed
                              est=0.3 * t * tu_rounds * tu_set / (1 << 30) + 0.05, timeout=300))
    notes["turns"] = ["Threads, all alive, take turns: each mallocs %d MiB of blocks in the band, "
                      "writes every page, checks and frees them, then wakes the next; %d rounds. "
                      "Peak RSS against one turn's %d MiB is the point." % (
                          tu_set >> 20, tu_rounds, tu_set >> 20)]

    cells += pascal_cells(mode, notes)

    wrk_threads = min(2, os.cpu_count() or 2)
    if quick:
        dur = 4
        cells.append(Cell("server", "connections=%d duration=%ds" % (SERVER_CONNECTIONS, dur),
                          {"connections": SERVER_CONNECTIONS, "server_threads": server_threads,
                           "wrk_threads": wrk_threads, "duration_s": dur},
                          "webserver", [], est=dur + 0.6, timeout=dur + 60))
        notes["server"] = ["Quick mode: wrk runs %d s (the seed: 201,000 requests)." % dur]
    else:
        cells.append(Cell("server", "connections=%d requests>=%d" % (SERVER_CONNECTIONS, SERVER_REQUESTS),
                          {"connections": SERVER_CONNECTIONS, "server_threads": server_threads,
                           "wrk_threads": wrk_threads, "requests": SERVER_REQUESTS},
                          "webserver", [], est=90, timeout=900))
        notes["server"] = ["wrk runs for long enough to exceed 201,000 requests (sized by a "
                           "3 s warm-up run against the same server)."]
    notes["server"].append("Server: %d worker threads, 48-row page, gzip level 6, 100 sessions "
                           "pinned by cookie, alternating /form1 and /form2; wrk: %d threads, "
                           "%d connections, not preloaded." % (server_threads, wrk_threads,
                                                              SERVER_CONNECTIONS))
    return cells


# ---- the Pascal tests: the seeds' programs in Free Pascal -----------------------

# The memory managers a Pascal program is built with (bench/pascal/build.sh):
# the RTL's own heap, the cmem unit (glibc's malloc), the spry unit (libspry.a).
PASCAL_ALLOCATORS = suite.PASCAL_ALLOCATORS
PASCAL_HOW = {
    "fpc-rtl": "(compiled in: the Free Pascal RTL heap)",
    "cmem": "(compiled in: the cmem unit, glibc malloc)",
    "spry": "(compiled in: the spry unit, libspry.a)",
}
PASCAL_CHURN_BANDS = [(8, 256), (256, 4096), (4096, 65536)]


def pascal_cells(mode, notes):
    """Seeds 000 and 001 as Free Pascal programs, each built three times
    (PASCAL_ALLOCATORS). Quick mode: about a minute on 2 cores."""
    quick = mode == "quick"
    cells = []

    def variants(prog):
        return {a: os.path.join("pascal", "%s_%s" % (prog, a)) for a in PASCAL_ALLOCATORS}

    count, loops = (1_000_000, 3) if quick else (3_000_000, 10)
    cells.append(Cell("pascal_shrink", "count=%d loops=%d" % (count, loops),
                      {"count": count, "loops": loops}, "pascal/shrink", [count, loops],
                      est=0.15e-6 * count * loops + 0.05, variants=variants("shrink")))
    notes["pascal_shrink"] = ["%d strings x %d loops%s." % (
        count, loops, " (the seed: 3,000,000 x 10)" if quick else "")]

    count = 1_000_000 if quick else 5_000_000
    cells.append(Cell("pascal_objects", "count=%d" % count, {"count": count},
                      "pascal/objects", [count], est=0.6e-6 * count + 0.05,
                      variants=variants("objects")))
    notes["pascal_objects"] = ["%d objects." % count]

    threads = [1, 2, 4, 8, 12] if quick else list(range(1, 13))
    pieces, repeat = (10_000, 50) if quick else (10_000, 100)
    for b in ["trivial", "builder", "blocks", "writer"]:
        for t in threads:
            cells.append(Cell("pascal_strbuild", "builder=%s threads=%d" % (b, t),
                              {"builder": b, "threads": t, "pieces": pieces, "repeat": repeat},
                              "pascal/strbuild", [b, t, pieces, repeat],
                              est=0.0015 * repeat * t + 0.03, variants=variants("strbuild")))
    notes["pascal_strbuild"] = ["%d pieces per string, %d strings per thread, threads %s." % (
        pieces, repeat, ",".join(map(str, threads)))]

    threads = [1, 4, 16, 64] if quick else CHURN_THREADS
    total = 1_000_000 if quick else 10_000_000
    for lo, hi in PASCAL_CHURN_BANDS:
        for t in threads:
            cells.append(Cell("pascal_churn", "threads=%d band=%s" % (t, band_label(lo, hi)),
                              {"threads": t, "band": band_label(lo, hi), "min": lo, "max": hi,
                               "ops": total // t, "live": 64},
                              "pascal/churn", [t, lo, hi, total // t, 64],
                              est=total * (0.05e-6 + 0.7e-11 * hi) + 0.03,
                              variants=variants("churn")))
    notes["pascal_churn"] = ["%d GetMem/FreeMem pairs per cell, split over the threads; 64 "
                             "live blocks per thread; bands %s." % (
                                 total, ", ".join(band_label(*b) for b in PASCAL_CHURN_BANDS))]
    rounds, ncalls = (5, 10_000_000) if quick else (9, 20_000_000)
    cells.append(Cell("pascal_calls", "rounds=%d calls=%d" % (rounds, ncalls),
                      {"rounds": rounds, "calls": ncalls}, "pascal/calls", [rounds, ncalls],
                      est=rounds * ncalls * 4e-8 + 0.05, variants=variants("calls")))
    notes["pascal_calls"] = ["MemSize and GetMem/FreeMem pairs, ns per call, medians of %d "
                             "rounds of %d calls; the spry build runs the same loops from C "
                             "alternating with the Pascal ones." % (rounds, ncalls)]
    for t in ("pascal_shrink", "pascal_objects", "pascal_strbuild", "pascal_churn",
              "pascal_calls"):
        notes[t].append("Built with fpc -O2 three times: the RTL heap (fpc-rtl), `uses cmem` "
                        "(glibc's malloc behind cmem's size prefix), `uses spry` (libspry.a "
                        "linked in); nothing preloaded.")
    return cells


def build_pascal(build):
    """Runs bench/pascal/build.sh; None when built, else why not."""
    script = os.path.join(BENCH_DIR, "pascal", "build.sh")
    try:
        r = subprocess.run(["bash", script, build], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        return "bench/pascal/build.sh failed: %s" % e
    if r.returncode == 77:
        return "fpc is not installed (Debian package fp-compiler; make deps installs it)"
    if r.returncode != 0:
        tail = " ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
        return "bench/pascal/build.sh failed: %s" % tail[-300:]
    return None


def cell_allocators(cell, used, pascal):
    """The allocators a cell runs under: the preloaded ones, or for a Pascal
    cell the memory managers compiled into its binaries."""
    if cell.variants:
        return [a for a in pascal if a.name in cell.variants]
    return [a for a in used if cell.only is None or a.name in cell.only]


# ---- running one program ------------------------------------------------------

RESULT_RE = re.compile(r"^RESULT (.*)$", re.M)


def parse_kv(text):
    out = {}
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def mem_total_kb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_program(argv, env, timeout, rss_limit_kb):
    """Runs argv in its own process group. Returns a dict: rc, out, err,
    wall, maxrss_kb (from wait4), killed (None, 'timeout' or 'rss')."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    sinks = {"out": b"", "err": b""}

    def drain(stream, key):
        sinks[key] = stream.read()
        stream.close()

    readers = [threading.Thread(target=drain, args=(p.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(p.stderr, "err"), daemon=True)]
    for r in readers:
        r.start()
    done = threading.Event()
    killed = [None]

    def watchdog():
        while not done.wait(0.2):
            why = None
            if time.monotonic() - t0 > timeout:
                why = "timeout"
            elif rss_limit_kb:
                rss = proc_status_kb(p.pid, "VmRSS")
                if rss and rss > rss_limit_kb:
                    why = "rss"
            if why:
                killed[0] = why
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                return

    dog = threading.Thread(target=watchdog, daemon=True)
    dog.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    except KeyboardInterrupt:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        os.wait4(p.pid, 0)
        raise
    wall = time.monotonic() - t0
    done.set()
    p.returncode = os.waitstatus_to_exitcode(status)
    try:                                 # leftovers of the group (none normally)
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    for r in readers:
        r.join(5)
    return {"rc": p.returncode, "out": sinks["out"].decode("utf-8", "replace"),
            "err": sinks["err"].decode("utf-8", "replace"), "wall": wall,
            "maxrss_kb": ru.ru_maxrss, "killed": killed[0]}


def judge(test, alloc, run, rss_limit_kb):
    """Status and metrics of a finished program run."""
    rc, err = run["rc"], run["err"]
    metrics, detected, maxrss = {}, "", None
    results = [parse_kv(m) for m in RESULT_RE.findall(run["out"])]
    results = [r for r in results if r.get("test") == test] or results
    if results:
        kv = results[-1]
        detected = kv.get("allocator", "")
        for m in METRICS.get(test, []):
            if m in kv:
                try:
                    metrics[m] = float(kv[m])
                except ValueError:
                    pass
        try:
            maxrss = float(kv.get("maxrss_kb", ""))
        except ValueError:
            maxrss = None
    if maxrss is None or maxrss <= 0:
        # wait4's ru_maxrss carries this runner's own RSS across the exec
        # (Linux folds the pre-exec high-water mark in): a fallback only.
        maxrss = float(run["maxrss_kb"]) if run.get("maxrss_kb") else None
    if test == "objects" and "alloc_s" in metrics and "free_s" in metrics:
        metrics["total_s"] = metrics["alloc_s"] + metrics["free_s"]

    if run["killed"] == "timeout":
        status = "timeout"
    elif run["killed"] == "rss":
        status = "killed (RSS over %d MiB)" % (rss_limit_kb // 1024)
    elif rc == 3 or "CORRUPT" in err:
        status = "CORRUPT"
    elif rc < 0:
        try:
            status = "crashed (%s)" % signal.Signals(-rc).name
        except ValueError:
            status = "crashed (signal %d)" % -rc
    elif rc != 0:
        status = "failed (exit %d)" % rc
    elif not results:
        status = "no RESULT line"
    elif METRICS.get(test) and METRICS[test][0] not in metrics:
        status = "bad output (no %s)" % METRICS[test][0]
    elif detected != alloc:
        status = "mismatch (found %s)" % (detected or "nothing")
    else:
        status = "ok"
    return status, metrics, detected, maxrss


# ---- the server test -----------------------------------------------------------

WRK_RE = re.compile(r"^WRKRESULT (.*)$", re.M)


def run_wrk(wrk, port, seconds, wrk_threads, connections, env):
    lua = os.path.join(BENCH_DIR, "server", "wrk.lua")
    sessions = max(1, connections // wrk_threads)
    argv = [wrk, "-t%d" % wrk_threads, "-c%d" % connections, "-d%ds" % seconds,
            "--timeout", "10s", "-s", lua, "http://127.0.0.1:%d/" % port, "--", str(sessions)]
    r = run_program(argv, env, seconds + 60, 0)
    m = WRK_RE.search(r["out"])
    return (parse_kv(m.group(1)) if m else None), r, argv


def run_server(cell, alloc, ctx):
    """Starts the server under the allocator, drives it with wrk, reads its
    peak RSS, stops it with SIGTERM. Returns (status, metrics, detected,
    maxrss_kb, log text)."""
    server = os.path.join(ctx.bench_dir, "webserver")
    env = alloc.env(ctx.base_env)
    argv = [server, "--port", "0", "--threads", str(cell.params["server_threads"])]
    log = ["$ %s%s" % ("LD_PRELOAD=%s " % alloc.path if alloc.path else "", " ".join(argv))]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    try:
        return drive_server(cell, alloc, ctx, p, log)
    finally:                            # interrupted, or an error: no server left behind
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()


def drive_server(cell, alloc, ctx, p, log):
    err_chunks = []
    t = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()), daemon=True)
    t.start()
    detected, port, line = "", None, b""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and port is None:
        ready, _, _ = select.select([p.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
            m = re.search(rb"READY port=(\d+)(?: allocator=(\S+))?", line)
            if m:
                port = int(m.group(1))
                detected = (m.group(2) or b"").decode()

    def stop_server():
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                return "did not stop on SIGTERM"
        return None

    if port is None:
        stop_server()
        t.join(2)
        return ("failed (server did not start)", {}, detected, None,
                "\n".join(log + [b"".join(err_chunks).decode("utf-8", "replace")]))
    wrk_env = dict(ctx.base_env)
    wrk_env.pop("LD_PRELOAD", None)
    wt, conns = cell.params["wrk_threads"], cell.params["connections"]
    if "duration_s" in cell.params:
        seconds = int(cell.params["duration_s"])
    else:                               # full: long enough for the request count
        probe, _, _ = run_wrk(ctx.wrk, port, 3, wt, conns, wrk_env)
        rate = 0.0
        if probe and float(probe.get("duration_us", 0)) > 0:
            rate = float(probe["requests"]) / (float(probe["duration_us"]) / 1e6)
        seconds = int(math.ceil(cell.params["requests"] * 1.15 / rate)) + 1 if rate > 0 else 60
        seconds = max(10, min(seconds, 600))
    res, wr, wargv = run_wrk(ctx.wrk, port, seconds, wt, conns, wrk_env)
    log.append("$ " + " ".join(wargv))
    log.append(wr["out"] + wr["err"])
    if (res and "requests" in cell.params and int(res.get("requests", 0)) < cell.params["requests"]
            and p.poll() is None):      # the warm-up underestimated: once more, longer
        seconds = int(seconds * 1.5 * cell.params["requests"] / max(1, int(res.get("requests", 1))))
        res, wr, wargv = run_wrk(ctx.wrk, port, min(seconds, 900), wt, conns, wrk_env)
        log.append("$ " + " ".join(wargv))
        log.append(wr["out"] + wr["err"])
    alive = p.poll() is None
    hwm = proc_status_kb(p.pid, "VmHWM") if alive else None
    stop_problem = stop_server() if alive else None
    t.join(5)
    err = b"".join(err_chunks).decode("utf-8", "replace")
    log.append(err)
    rc = p.returncode
    metrics = {}
    if res:
        dur = float(res.get("duration_us", 0)) / 1e6
        reqs = float(res.get("requests", 0))
        errors = sum(float(res.get(k, 0)) for k in ("non2xx", "errors_connect", "errors_read",
                                                     "errors_write", "errors_timeout"))
        if dur > 0:
            metrics = {"requests_per_s": reqs / dur, "requests": reqs,
                       "latency_p50_ms": float(res.get("latency_p50_us", 0)) / 1000.0,
                       "latency_p99_ms": float(res.get("latency_p99_us", 0)) / 1000.0,
                       "errors": errors, "duration_s": dur}
    if not alive:
        status = ("CORRUPT" if rc == 3 or "CORRUPT" in err else
                  "crashed (%s)" % signal.Signals(-rc).name if rc is not None and rc < 0 else
                  "failed (server exited %s during the run)" % rc)
    elif stop_problem:
        status = "failed (%s)" % stop_problem
    elif rc not in (0, None):
        status = ("crashed (%s) at exit" % signal.Signals(-rc).name if rc < 0
                  else "failed (exit %d at SIGTERM)" % rc)
    elif not res or not metrics:
        status = "failed (wrk: %s)" % ((wr["err"] or wr["out"]).strip().splitlines() or ["no result"])[-1][:80]
    elif metrics["errors"] > 0.001 * max(1.0, metrics["requests"]):
        status = "failed (%d HTTP errors)" % metrics["errors"]
    elif detected != alloc.family:
        status = "mismatch (found %s)" % (detected or "nothing")
    else:
        status = "ok"
    return status, metrics, detected, hwm, "\n".join(log)


# ---- the session ---------------------------------------------------------------

class Context:
    pass


def fmt_dur(s):
    s = int(round(max(0.0, s)))
    if s >= 3600:
        return "%dh%02dm" % (s // 3600, s % 3600 // 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


class Progress:
    """One line on stderr: redrawn in place on a terminal, a line per run
    otherwise."""

    def __init__(self, total_runs, total_est):
        self.total_runs, self.total_est = total_runs, total_est
        self.done_runs, self.done_est = 0, 0.0
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.width = 0

    def left(self):
        elapsed = time.monotonic() - self.t0
        remaining = max(0.0, self.total_est - self.done_est)
        if self.done_est > 1.0:
            remaining *= elapsed / self.done_est
        return elapsed, remaining

    def show(self, test, cell, alloc, rep, repeats):
        elapsed, remaining = self.left()
        pct = 100.0 * self.done_runs / max(1, self.total_runs)
        line = "[%4d/%d %3.0f%%] %s %s | %s%s | elapsed %s | left ~%s" % (
            self.done_runs + 1, self.total_runs, pct, test, cell, alloc,
            " (repeat %d/%d)" % (rep + 1, repeats) if repeats > 1 else "",
            fmt_dur(elapsed), fmt_dur(remaining))
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def advance(self, est):
        self.done_runs += 1
        self.done_est += est

    def say(self, text):
        """A line that must stay visible (problems)."""
        if self.tty:
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def finish(self):
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def machine_info():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    import platform
    return {"cpu": cpu, "cpus": cpus, "ram": "%.1f GiB" % (mem_total_kb() / 1048576.0),
            "kernel": platform.release(), "python": platform.python_version()}


def git_commit():
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return r.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="run.py", description="spry's benchmark suite (issues 3 and 8): every test, every allocator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="tests: " + ", ".join(suite.TEST_ORDER) +
               "\nallocators: " + ", ".join(suite.ALLOCATORS))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick",
                      help="every test at reduced size, under 10 minutes on 2 cores (default)")
    mode.add_argument("--full", action="store_const", dest="mode", const="full",
                      help="the seeds' sizes and durations (hours)")
    mode.add_argument("--churn-table", action="store_const", dest="mode", const="churn-table",
                      help="only the churn grid of issues 2 and 8 (live 64, 1024, 4096 x "
                           "bands 16-128 B .. 64-512 KiB x T=1,2,8,64)")
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--bench-dir", help="where the benchmark programs are (default: BUILD/bench)")
    ap.add_argument("--only", action="append", default=[], metavar="TEST",
                    help="run only this test (repeatable, or comma-separated)")
    ap.add_argument("--allocators", metavar="A,B,...", help="run only these allocators")
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                    help="use this library for allocator NAME (or add one)")
    ap.add_argument("--repeats", type=int, help="runs per cell and allocator (default: quick 1, full 3)")
    ap.add_argument("--seconds", type=float, help="churn seconds per cell (overrides the mode's)")
    ap.add_argument("--server-threads", type=int, default=4, help="server worker threads (default 4)")
    ap.add_argument("--results", default=os.path.join(REPO, "results"),
                    help="parent of the dated results directory (default: results/)")
    ap.add_argument("--out", help="exact results directory (default: RESULTS/<date>)")
    ap.add_argument("--rss-limit-mb", type=int,
                    help="kill a run whose RSS passes this (default: 85%% of RAM)")
    ap.add_argument("--no-charts", action="store_true", help="write the report without charts")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its estimate, run nothing")
    args = ap.parse_args(argv)
    args.mode = args.mode or "quick"
    if args.repeats is None:
        args.repeats = 3 if args.mode == "full" else 1
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    args.only = [t.strip() for spec in args.only for t in spec.split(",") if t.strip()]
    unknown = [t for t in args.only if t not in suite.TESTS]
    if unknown:
        ap.error("unknown test(s) %s (tests: %s)" % (", ".join(unknown), ", ".join(suite.TEST_ORDER)))
    args.build = os.path.abspath(args.build)
    args.bench_dir = os.path.abspath(args.bench_dir or os.path.join(args.build, "bench"))
    return args


def main(argv):
    args = parse_args(argv)
    t_start = time.monotonic()
    started = datetime.datetime.now()

    test_notes = {}
    if args.mode == "churn-table":
        grid = churn_grid("churn-table", args.seconds)
        scaled = []
        cells = churn_cells(grid, churn_budget(), scaled)
        test_notes["churn"] = ["Issue 8's grid (issue 2's table at three working sets)."] + \
            churn_notes(grid, scaled)
    else:
        cells = plan(args.mode, args.server_threads, test_notes, args.seconds)
    if args.only:
        cells = [c for c in cells if c.test in args.only]

    allocators = discover_allocators(args)
    used = [a for a in allocators if a.used]
    for a in allocators:
        if not a.used and a.reason != "not selected (--allocators)":
            print("run.py: allocator %s skipped: %s" % (a.name, a.reason))
    wanted = [a.strip() for a in args.allocators.split(",")] if args.allocators else None
    if not used and not (wanted and set(wanted) & set(PASCAL_ALLOCATORS)):
        print("run.py: no allocator to run", file=sys.stderr)
        return 1

    # The Pascal tests' memory managers are compiled in (nothing preloaded).
    # --allocators selects them by name; glibc selects cmem (glibc's malloc).
    pascal = [Allocator(n, None, True) for n in PASCAL_ALLOCATORS
              if wanted is None or n in wanted or (n == "cmem" and "glibc" in wanted)]
    pascal_why = None
    if any(c.variants for c in cells) and not args.dry_run:
        print("run.py: building the Pascal benchmarks (bench/pascal/build.sh)")
        pascal_why = build_pascal(args.build)

    # Programs that are missing: the test is skipped, and the report says so.
    skipped_tests, runnable = [], []
    wrk = shutil.which("wrk")
    checked = {}
    for c in cells:
        if c.test not in checked:
            prog = os.path.join(args.bench_dir, c.program)
            why = None
            if c.variants:
                missing = [p for a, p in c.variants.items()
                           if not os.access(os.path.join(args.bench_dir, p), os.X_OK)]
                if pascal_why:
                    why = pascal_why
                elif not pascal:
                    why = "none of its memory managers (%s) is selected" % ", ".join(PASCAL_ALLOCATORS)
                elif missing and not args.dry_run:
                    why = "programs not built: %s" % ", ".join(missing)
            elif not os.access(prog, os.X_OK):
                why = "program %s not built" % prog
                if c.test == "frag32":
                    why += " (this toolchain cannot build -m32 programs; gcc-multilib provides it)"
            elif c.test == "server" and not wrk:
                why = "wrk is not installed (scripts/install-peers.sh installs it)"
            checked[c.test] = why
            if why:
                skipped_tests.append({"test": c.test, "reason": why})
                print("run.py: test %s skipped: %s" % (c.test, why))
        if not checked[c.test]:
            runnable.append(c)
    cells = runnable
    names = {a.name for a in used}
    for test in sorted({c.test for c in cells if c.only and not c.variants and not names & set(c.only)}):
        why = "runs under %s only, which is not selected" % " or ".join(
            [c.only for c in cells if c.test == test][0])
        skipped_tests.append({"test": test, "reason": why})
        print("run.py: test %s skipped: %s" % (test, why))
    cells = [c for c in cells if c.variants or not c.only or names & set(c.only)]

    runs_per_cell = {id(c): len(cell_allocators(c, used, pascal)) * args.repeats for c in cells}
    total_runs = sum(runs_per_cell.values())
    total_est = sum(c.est * runs_per_cell[id(c)] for c in cells)
    per_test = {}
    for c in cells:
        per_test.setdefault(c.test, [0, 0.0])
        per_test[c.test][0] += 1
        per_test[c.test][1] += c.est * runs_per_cell[id(c)]
    print("run.py: %s mode, %d cells, %d runs, allocators %s%s, %d repeat(s); estimated %s" % (
        args.mode, len(cells), total_runs, ",".join(a.name for a in used),
        " (Pascal: %s)" % ",".join(a.name for a in pascal) if any(c.variants for c in cells) else "",
        args.repeats, fmt_dur(total_est)))
    if args.dry_run:
        for t, (n, est) in per_test.items():
            print("  %-15s %4d cells  ~%s" % (t, n, fmt_dur(est)))
        for t, lines in test_notes.items():
            for line in lines:
                if line.startswith("**Scaled"):
                    print("  %s: %s" % (t, line.replace("**", "")))
        return 0
    if not cells:
        print("run.py: nothing to run", file=sys.stderr)
        return 1

    load = os.getloadavg()[0]
    ncpu = machine_info()["cpus"] or 1
    if load > 0.5 * ncpu:
        print("run.py: warning: the machine is busy (load average %.1f on %d CPUs): other "
              "work running now will distort the numbers" % (load, ncpu), file=sys.stderr)

    outdir = args.out or os.path.join(args.results, started.strftime("%Y-%m-%d_%H%M%S"))
    os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
    rss_limit_kb = (args.rss_limit_mb * 1024) if args.rss_limit_mb else int(mem_total_kb() * 0.85)

    ctx = Context()
    ctx.bench_dir, ctx.wrk = args.bench_dir, wrk
    ctx.base_env = dict(os.environ)
    ctx.base_env.pop("LD_PRELOAD", None)

    meta = {
        "started": started.strftime("%Y-%m-%d %H:%M:%S"), "mode": args.mode,
        "repeats": args.repeats, "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())
                                                      if sys.argv and sys.argv[0] else "run.py"] + argv),
        "build": args.build, "bench_dir": args.bench_dir, "commit": git_commit(),
        "machine": machine_info(),
        "allocators": [a.as_meta() for a in allocators] + [
            dict(a.as_meta(), how=PASCAL_HOW[a.name], pascal=True) for a in pascal
            if any(c.variants for c in cells)],
        "skipped_tests": skipped_tests, "test_notes": test_notes, "failures": [],
        "rss_limit_mb": rss_limit_kb // 1024, "load_before": round(load, 2),
    }

    csv_path = os.path.join(outdir, "results.csv")
    csv_file = open(csv_path, "w", newline="")
    writer = csv.DictWriter(csv_file, fieldnames=aggregate.CSV_FIELDS)
    writer.writeheader()
    runs_log = open(os.path.join(outdir, "runs.log"), "w")
    progress = Progress(total_runs, total_est)
    corrupt = 0
    ok_runs = 0
    interrupted = False

    try:
        for ci, cell in enumerate(cells):
            allowed = cell_allocators(cell, used, pascal)
            for rep in range(args.repeats):
                k = rep % len(allowed)
                for alloc in allowed[k:] + allowed[:k]:
                    progress.show(cell.test, cell.label, alloc.name, rep, args.repeats)
                    t_run = time.monotonic()
                    if cell.test == "server":
                        status, metrics, detected, maxrss, text = run_server(cell, alloc, ctx)
                        wall = time.monotonic() - t_run
                        cmdline = "server (%s)" % cell.label
                    else:
                        program = cell.variants[alloc.name] if cell.variants else cell.program
                        argv_run = [os.path.join(args.bench_dir, program)] + cell.args
                        run = run_program(argv_run, alloc.env(ctx.base_env), cell.timeout, rss_limit_kb)
                        status, metrics, detected, maxrss = judge(cell.test, alloc.family, run, rss_limit_kb)
                        wall = run["wall"]
                        cmdline = "%s%s" % ("LD_PRELOAD=%s " % alloc.path if alloc.path else "",
                                            " ".join(argv_run))
                        text = "$ %s\nexit %s%s\n--- stdout\n%s--- stderr\n%s" % (
                            cmdline, run["rc"], " (killed: %s)" % run["killed"] if run["killed"] else "",
                            run["out"], run["err"])
                    progress.advance(cell.est)
                    runs_log.write("%s\t%s\t%s\trepeat=%d\t%s\t%.3fs\t%s\n" % (
                        cell.test, cell.label, alloc.name, rep, status, wall, cmdline))
                    runs_log.flush()
                    base = {"test": cell.test, "cell": cell.label,
                            "params": suite.format_params(cell.params), "allocator": alloc.name,
                            "detected": detected, "repeat": rep, "status": status,
                            "maxrss_kb": "" if maxrss is None else "%d" % maxrss,
                            "wall_s": "%.4f" % wall}
                    if metrics:
                        for m, v in metrics.items():
                            writer.writerow(dict(base, metric=m, value="%.6g" % v,
                                                 better=suite.better(m)))
                    else:
                        writer.writerow(dict(base, metric="", value="", better=""))
                    csv_file.flush()
                    if status == "ok":
                        ok_runs += 1
                    else:
                        if status == "CORRUPT":
                            corrupt += 1
                        logname = "%s_%03d_%s_r%d.txt" % (cell.test, ci, alloc.name, rep)
                        with open(os.path.join(outdir, "logs", logname), "w") as f:
                            f.write(text)
                        tail = "\n".join([l for l in text.splitlines() if l.strip()][-3:])
                        meta["failures"].append({"test": cell.test, "cell": cell.label,
                                                 "allocator": alloc.name, "repeat": rep,
                                                 "status": status, "log": "logs/" + logname,
                                                 "stderr_tail": tail[-400:]})
                        loud = "!!! " if status == "CORRUPT" else "! "
                        progress.say("%s%s: %s %s under %s (log: %s)" % (
                            loud, status, cell.test, cell.label, alloc.name,
                            os.path.join(outdir, "logs", logname)))
    except KeyboardInterrupt:
        interrupted = True
        progress.say("run.py: interrupted; writing the report of what ran")
    progress.finish()
    csv_file.close()
    runs_log.close()

    meta["elapsed_s"] = time.monotonic() - t_start
    meta["load_after"] = round(os.getloadavg()[0], 2)
    if meta["load_before"] > 0.5 * ncpu:
        meta.setdefault("notes", []).append(
            "**The machine was busy**: load average %.1f on %d CPUs when the run started. "
            "Other work competed for the CPUs, so the numbers are less reliable than usual."
            % (meta["load_before"], ncpu))
    meta["interrupted"] = interrupted
    if interrupted:
        meta.setdefault("notes", []).append("**The run was interrupted: the results are partial.**")
    with open(os.path.join(outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)

    from report import make_report
    report_path, charts = make_report.build(outdir, meta, with_charts=not args.no_charts,
                                            log=lambda s: print("run.py: " + s))
    if args.mode == "churn-table":
        res = aggregate.Results.load(csv_path)
        table = markdown.churn_table(res)
        with open(os.path.join(outdir, "churn_table.md"), "w") as f:
            f.write("# Churn grid (issues 2 and 8): millions of malloc/free pairs per second "
                    "and peak RSS\n\n")
            f.write("Run %s, %d repeat(s), commit %s; load average %.2f at the start, %.2f at "
                    "the end, %s CPUs.\n\n" % (meta["started"], args.repeats, meta["commit"],
                                                meta["load_before"], meta["load_after"], ncpu))
            for note in test_notes.get("churn", []):
                f.write("- %s\n" % note)
            f.write("\n" + "\n".join(table) + "\n")
        print("\n".join(table))
    print("run.py: %d runs (%d ok) in %s" % (progress.done_runs, ok_runs, fmt_dur(meta["elapsed_s"])))
    print("run.py: results in %s" % outdir)
    print("run.py:   results.csv, meta.json, runs.log, report.md%s%s" % (
        ", churn_table.md" if args.mode == "churn-table" else "",
        (", %d charts (%s)" % (len(charts), ", ".join(charts[:4]) + (", ..." if len(charts) > 4 else "")))
        if charts else ""))
    if meta["failures"]:
        print("run.py: %d run(s) failed or were flagged; see the Problems section of %s"
              % (len(meta["failures"]), report_path))
    if corrupt:
        print("run.py: !!! %d run(s) found CORRUPT memory: an allocator bug, see %s"
              % (corrupt, report_path))
        return 3
    if interrupted:
        return 130
    return 0 if ok_runs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

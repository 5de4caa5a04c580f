#!/usr/bin/python3
"""The cautious build against memcheck and ASan (issue 9, "Measure and report").

    make build && /usr/bin/python3 bench/cautious.py              # everything, ~6 min on 2 cores
    /usr/bin/python3 bench/cautious.py --only detect              # the detection table only (~1 min)
    /usr/bin/python3 bench/cautious.py --out docs/cautious.md     # what docs/cautious.md is made with

Three tables, in Markdown on stdout (or --out FILE):

- speed: wall time (median of --repeats runs; memcheck once) and peak RSS
  of the same workloads under spry (libspry.so preloaded: the baseline),
  the cautious build (libspry-debug.so preloaded, leak report on), valgrind
  memcheck (--leak-check=full) and ASan. Workloads: a subset of python3's own
  test suite, sqlite3 running a generated SQL script, tests/stl_heavy.cpp.
  ASan needs a rebuild: the C++ workload is compiled here with
  -fsanitize=address; Debian's python3 and sqlite3 cannot be, so they get
  libasan preloaded instead (its allocator only: redzones, quarantine, leak
  check, no checks of reads and writes), marked as such.
- memory: resident bytes per live block of 32 and 256 bytes, and what stays
  resident after they are all freed (the quarantines), bench/cautious_blocks.c
  under each tool.
- detection: every case of the wrong-programs suite (tests/cautious_wrong.c,
  tests/cautious_wrong_cxx.cpp) under each tool: caught or not, decided by
  the tool's report text for that very error (kind, block size, allocating
  function), never by a crash alone.

Not part of `make test` or CI (memcheck alone takes minutes). Python 3
standard library only; needs gcc/g++ with libasan (Debian: comes with gcc),
valgrind, sqlite3 and python's test suite (scripts/install-deps.sh).
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
# python3's own tests: a few seconds natively, so that memcheck's run stays
# within about 5 minutes on the loaded 2-core machine; none starts python
# subprocesses (test_json's do), which memcheck would not follow and whose
# leak reports would fail the tests under libasan. The same modules run
# under every tool.
PY_TESTS = ["test_re", "test_collections", "test_heapq", "test_bisect", "test_difflib", "test_dict",
            "test_textwrap"]
TOOLS = ["spry", "cautious", "memcheck", "asan"]
TOOL_TITLE = {"spry": "spry", "cautious": "spry cautious", "memcheck": "memcheck", "asan": "ASan"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.lib = os.path.join(self.build, "libspry.so")
        self.debug_lib = os.path.join(self.build, "libspry-debug.so")
        self.work = tempfile.mkdtemp(prefix="spry-cautious-")
        self.bin = os.path.join(self.build, "cautious-bench")
        os.makedirs(self.bin, exist_ok=True)
        self.libasan = self.find_libasan()
        # the sources measured: taken now, before anything may change them
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        self.commit = head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")

    # ---- building what the build tree does not have --------------------------

    def compile(self, out, compiler, flags, sources, libs=()):
        """Builds an ASan or plain copy of a test program; returns its path."""
        path = os.path.join(self.bin, out)
        srcs = [os.path.join(REPO, s) for s in sources]
        if os.path.exists(path) and all(os.path.getmtime(s) <= os.path.getmtime(path) for s in srcs):
            return path
        cmd = [compiler, *flags, "-o", path, *srcs, *libs]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("cannot build %s: %s\n%s" % (out, " ".join(cmd), r.stderr[-2000:]))
        return path

    def find_libasan(self):
        r = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True)
        path = os.path.realpath(r.stdout.strip()) if r.returncode == 0 else ""
        return path if os.path.isfile(path) else None

    def programs(self):
        """The workloads' binaries: (plain, ASan) per workload that has both."""
        asan = ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
        need = [self.lib, self.debug_lib, os.path.join(self.build, "tests", "stl_heavy"),
                os.path.join(self.build, "tests", "cautious_wrong"),
                os.path.join(self.build, "tests", "cautious_wrong_cxx")]
        missing = [p for p in need if not os.path.exists(p)]
        if missing:
            sys.exit("not built: %s (run `make build`; libspry-debug.so needs libunwind-dev and "
                     "libdw-dev)" % ", ".join(missing))
        # the cautious tests' own flags (tests/CMakeLists.txt), so that
        # every tool sees the same code
        wrong = ["-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-Wno-free-nonheap-object",
                 "-fno-builtin-malloc", "-fno-builtin-free", "-fno-builtin-calloc", "-fno-builtin-realloc"]
        return {
            "stl_heavy": (os.path.join(self.build, "tests", "stl_heavy"),
                          self.compile("stl_heavy_asan", "g++", ["-O2", "-pthread", *asan],
                                       ["tests/stl_heavy.cpp"], ["-ldl"])),
            "blocks": (self.compile("cautious_blocks", "gcc", ["-O2", "-g"], ["bench/cautious_blocks.c"]),
                       self.compile("cautious_blocks_asan", "gcc", ["-O2", *asan], ["bench/cautious_blocks.c"])),
            "wrong": (os.path.join(self.build, "tests", "cautious_wrong"),
                      self.compile("cautious_wrong_asan", "gcc", [*wrong, "-pthread", "-fsanitize=address"],
                                   ["tests/cautious_wrong.c"])),
            "wrong_cxx": (os.path.join(self.build, "tests", "cautious_wrong_cxx"),
                          self.compile("cautious_wrong_cxx_asan", "g++", [*wrong, "-fsanitize=address"],
                                       ["tests/cautious_wrong_cxx.cpp"])),
        }

    # ---- running one command under one tool ------------------------------------

    def command(self, tool, plain, asan_bin, args, tag):
        """(argv, env, note) of a run; note marks the libasan-preload stand-in.
        None when the tool cannot run this workload."""
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "SPRY_DEBUG_LOG", "ASAN_OPTIONS", "PYTHONMALLOC"):
            env.pop(k, None)
        logs = os.path.join(self.work, tag)
        if tool == "spry":
            env["LD_PRELOAD"] = self.lib
            return [plain, *args], env, ""
        if tool == "cautious":
            env["LD_PRELOAD"] = self.debug_lib
            env["SPRY_DEBUG_LOG"] = logs + ".cautious.%p.log"
            return [plain, *args], env, ""
        if tool == "memcheck":
            return (["valgrind", "--tool=memcheck", "--leak-check=full", "--num-callers=16",
                     "--log-file=" + logs + ".memcheck.%p.log", plain, *args], env, "")
        # ASan: the rebuilt program, else libasan preloaded into the original
        env["ASAN_OPTIONS"] = "log_path=%s.asan:detect_leaks=1" % logs
        if asan_bin:
            return [asan_bin, *args], env, ""
        if not self.libasan:
            return None
        env["LD_PRELOAD"] = self.libasan
        # libasan refuses to run when it is not the first library the
        # program links; preloaded, it is first, but the check does not see it
        env["ASAN_OPTIONS"] += ":verify_asan_link_order=0"
        return [plain, *args], env, "preload"

    def run(self, argv, env, stdin=None, timeout=1800):
        """Runs argv; returns (status, wall seconds, peak RSS KiB, output, CPU
        seconds: user and system, its waited-for children's included)."""
        out = os.path.join(self.work, "out.txt")
        with open(out, "w") as o, open(stdin or os.devnull) as i:
            t0 = time.monotonic()
            p = subprocess.Popen(argv, env=env, stdin=i, stdout=o, stderr=subprocess.STDOUT, cwd=self.work)
            deadline = t0 + timeout
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    pid, status, ru = os.wait4(p.pid, 0)
                    break
                time.sleep(0.01)
            wall = time.monotonic() - t0
        with open(out, errors="replace") as f:
            return (os.waitstatus_to_exitcode(status), wall, ru.ru_maxrss, f.read(),
                    ru.ru_utime + ru.ru_stime)

    def reports(self, tag):
        """Everything the tools wrote for run `tag` (then removed)."""
        text = ""
        for name in sorted(os.listdir(self.work)):
            if name.startswith(tag + "."):
                path = os.path.join(self.work, name)
                with open(path, errors="replace") as f:
                    text += f.read()
                os.unlink(path)
        return text

    # ---- speed -----------------------------------------------------------------

    def sql_script(self):
        """A SQL script of inserts, indexes, selects, updates and deletes."""
        path = os.path.join(self.work, "workload.sql")
        rows = self.args.sql_rows
        with open(path, "w") as f:
            f.write("create table t(id integer primary key, name text, grp int, v real, note text);\n")
            f.write("begin;\n")
            for i in range(rows):
                f.write("insert into t values(%d, 'n%08x', %d, %d.%d, '%s');\n"
                        % (i, (i * 2654435761) % 4294967296, i % 97, i % 1000, i % 7,
                           "note-%d-" % i + "x" * (i % 61)))
            f.write("commit;\n")
            f.write("create index t_name on t(name);\ncreate index t_grp on t(grp, v);\n")
            f.write("select grp, count(*), printf('%.2f', avg(v)), max(length(note)) from t "
                    "group by grp order by 2 desc, 1 limit 3;\n")
            f.write("select count(*) from t a join t b on b.id = a.grp * 100 where a.v > 500;\n")
            f.write("update t set note = note || '-updated', v = v * 2 where id % 3 = 0;\n")
            f.write("delete from t where id % 7 = 0;\n")
            f.write("create table s as select grp, group_concat(name, ',') as names from t group by grp;\n")
            f.write("select count(*), sum(length(names)) from s;\n")
            f.write("select count(*), sum(length(name)), printf('%.1f', sum(v)) from t where name like 'n1%';\n")
            f.write("pragma integrity_check;\n")
        return path

    def workloads(self, progs):
        """name -> (plain binary, ASan binary or None, args, stdin, description)."""
        py_args = ["-m", "test", "--timeout", "1800", *self.args.python_tests]
        sql = self.sql_script()
        return {
            "python3 tests": (PY, None, py_args, None,
                              "`python3 -m test %s` (Debian's python3 %s)"
                              % (" ".join(self.args.python_tests), sys.version.split()[0])),
            "sqlite3": ("/usr/bin/sqlite3", None, ["-bail", ":memory:"], sql,
                        "`sqlite3 :memory:` reading a generated script: %d inserts, 2 indexes, "
                        "a join, group by, update, delete, group_concat, integrity check"
                        % self.args.sql_rows),
            "stl_heavy": (progs["stl_heavy"][0], progs["stl_heavy"][1], [], None,
                          "`tests/stl_heavy.cpp` (-O2 -g; maps, unordered maps, shared_ptr trees, "
                          "strings, lists, over-aligned types, up to 9 threads)"),
        }

    def speed(self, progs):
        works = self.workloads(progs)
        results = {}                 # (workload, tool) -> list of (wall, rss)
        notes = {}
        failures = []
        before = load()
        for rep in range(self.args.repeats):
            for name, (plain, asan_bin, args, stdin, _) in works.items():
                # rotate the order each repeat: drift hits every tool alike
                order = TOOLS[rep % len(TOOLS):] + TOOLS[:rep % len(TOOLS)]
                for tool in order:
                    if tool == "memcheck" and rep > 0:
                        continue     # minutes per run: once
                    spec = self.command(tool, plain, asan_bin, args, "speed")
                    if not spec:
                        continue
                    argv, env, note = spec
                    rc, wall, rss, out, cpu = self.run(argv, env, stdin=stdin)
                    text = self.reports("speed")
                    log("speed %-14s %-9s run %d: %.2f s, %d MiB, status %d" % (name, tool, rep + 1, wall, rss >> 10, rc))
                    if rc != 0 and not (tool == "asan" and leaks_only(rc, text)):
                        failures.append("%s under %s: status %d: %s" % (name, tool, rc, " ".join(out[-300:].split())))
                        continue
                    if tool == "cautious" and "ERROR:" in text:
                        failures.append("%s under spry cautious: an error reported in a right program" % name)
                    results.setdefault((name, tool), []).append((wall, rss, cpu))
                    notes[(name, tool)] = note
        after = load()
        return works, results, notes, failures, before, after

    # ---- memory per block ----------------------------------------------------------

    def memory(self, progs):
        rows = []
        before = load()
        for size in (32, 256):
            row = {}
            for tool in TOOLS:
                argv, env, _ = self.command(tool, progs["blocks"][0], progs["blocks"][1],
                                            [str(self.args.blocks), str(size)], "mem")
                if tool == "asan":
                    env["ASAN_OPTIONS"] += ":detect_leaks=0"
                rc, _, _, out, _ = self.run(argv, env)
                self.reports("mem")
                m = re.search(r"per_block_bytes=([0-9.]+) after_free_kib=(-?[0-9]+)", out)
                row[tool] = (float(m.group(1)), int(m.group(2))) if rc == 0 and m else None
                log("memory %d B %-9s %s" % (size, tool, row[tool]))
            rows.append((size, row))
        return rows, before, load()

    # ---- detection ------------------------------------------------------------------

    # name, program, case, then per tool the patterns that must all match the
    # tool's report for the error to count as caught (Python regex, searched
    # over every report the run wrote). Leaks: the allocating function must be
    # named in a leak record, once per site.
    CASES = [
        ("overrun by 1 byte", "wrong", "overrun_1",
         [r"ERROR: overrun: block of 24 bytes"],
         [r"Invalid write of size 1", r"0 bytes after a block of size 24 alloc'd"],
         [r"ERROR: AddressSanitizer: heap-buffer-overflow", r"0 bytes (to the right|after) (of )?24-byte region"]),
        ("underrun by 1 byte", "wrong", "underrun_1",
         [r"ERROR: underrun: block of 24 bytes"],
         [r"Invalid write of size 1", r"1 bytes before a block of size 24 alloc'd"],
         [r"ERROR: AddressSanitizer: heap-buffer-overflow", r"1 bytes (to the left|before) (of )?24-byte region"]),
        ("overrun by 32 bytes", "wrong", "overrun_32",
         [r"ERROR: overrun: block of 40 bytes[^\n]*32 bytes changed"],
         [r"Invalid write of size", r"0 bytes after a block of size 40 alloc'd"],
         [r"ERROR: AddressSanitizer: heap-buffer-overflow", r"0 bytes (to the right|after) (of )?40-byte region"]),
        ("write after free", "wrong", "write_after_free",
         [r"ERROR: write after free: block of 64 bytes"],
         [r"Invalid write of size 1", r"8 bytes inside a block of size 64 free'd"],
         [r"ERROR: AddressSanitizer: heap-use-after-free", r"8 bytes inside of 64-byte region"]),
        ("double free", "wrong", "double_free",
         [r"ERROR: double free: free\(0x[0-9a-f]+\)[^\n]*block of 40 bytes"],
         [r"Invalid free\(\)", r"0 bytes inside a block of size 40 free'd"],
         [r"ERROR: AddressSanitizer: attempting double-free", r"40-byte region"]),
        ("free of a stack address", "wrong", "free_stack",
         [r"ERROR: invalid free: free\(0x[0-9a-f]+\): not in spry's memory"],
         [r"Invalid free\(\)", r"on thread 1's stack"],
         [r"ERROR: AddressSanitizer: attempting free on address which was not malloc\(\)-ed",
          r"is located in stack of thread"]),
        ("free of an interior pointer", "wrong", "free_interior",
         [r"ERROR: invalid free: free\(0x[0-9a-f]+\): inside a block \(an interior pointer\) \(block of 100 bytes"],
         [r"Invalid free\(\)", r"16 bytes inside a block of size 100 alloc'd"],
         [r"ERROR: AddressSanitizer: attempting free on address which was not malloc\(\)-ed",
          r"16 bytes inside of 100-byte region"]),
        ("free of 0x1", "wrong", "free_wild",
         [r"ERROR: invalid free: free\(0x1\)"],
         [r"Invalid free\(\)", r"Address 0x1 is not stack'd, malloc'd"],
         [r"ERROR: AddressSanitizer: attempting free on address which was not malloc\(\)-ed: 0x0*1 "]),
        ("realloc of a freed block", "wrong", "realloc_freed",
         [r"ERROR: realloc of a freed block: realloc\(0x[0-9a-f]+\)[^\n]*block of 32 bytes"],
         [r"Invalid free\(\) / delete / delete\[\] / realloc\(\)", r"0 bytes inside a block of size 32 free'd"],
         [r"ERROR: AddressSanitizer: (heap-use-after-free|attempting double-free)", r"32-byte region"]),
        ("leak from two call sites", "wrong", "leak_two_sites",
         [r"LEAK: 3 blocks, 300 bytes[^\n]*\n[^\n]*leak_site_a", r"LEAK: 5 blocks, 250 bytes[^\n]*\n[^\n]*leak_site_b"],
         [r"are (definitely|possibly) lost in loss record[^\n]*\n(==\d+==    (at|by)[^\n]*\n)*?[^\n]*leak_site_a",
          r"are (definitely|possibly) lost in loss record[^\n]*\n(==\d+==    (at|by)[^\n]*\n)*?[^\n]*leak_site_b"],
         [r"leak of \d+ byte\(s\) in \d+ object\(s\) allocated from:\n(    #[^\n]*\n)*?[^\n]*leak_site_a",
          r"leak of \d+ byte\(s\) in \d+ object\(s\) allocated from:\n(    #[^\n]*\n)*?[^\n]*leak_site_b"]),
        ("leak in a thread", "wrong", "leak_in_thread",
         [r"LEAK: 7 blocks, 539 bytes[^\n]*\n[^\n]*thread_leaker"],
         [r"are (definitely|possibly) lost in loss record[^\n]*\n(==\d+==    (at|by)[^\n]*\n)*?[^\n]*thread_leaker"],
         [r"leak of \d+ byte\(s\) in \d+ object\(s\) allocated from:\n(    #[^\n]*\n)*?[^\n]*thread_leaker"]),
        ("delete of new[] (mismatched)", "wrong_cxx", "delete_of_array",
         [r"ERROR: mismatched free: operator delete\(0x[0-9a-f]+\): the block was allocated with operator new\[\]"],
         [r"Mismatched free\(\) / delete / delete \[\]", r"block of size 40 alloc'd"],
         [r"ERROR: AddressSanitizer: alloc-dealloc-mismatch \(operator new \[\] vs operator delete\)"]),
        ("delete of malloc (mismatched)", "wrong_cxx", "delete_of_malloc",
         [r"ERROR: mismatched free: operator delete\(0x[0-9a-f]+\): the block was allocated with malloc"],
         [r"Mismatched free\(\) / delete / delete \[\]", r"block of size 48 alloc'd"],
         [r"ERROR: AddressSanitizer: alloc-dealloc-mismatch \(malloc vs operator delete\)"]),
        ("free of new (mismatched)", "wrong_cxx", "free_of_new",
         [r"ERROR: mismatched free: free\(0x[0-9a-f]+\): the block was allocated with operator new "],
         [r"Mismatched free\(\) / delete / delete \[\]", r"block of size 4 alloc'd"],
         [r"ERROR: AddressSanitizer: alloc-dealloc-mismatch \(operator new vs free\)"]),
    ]

    def detect(self, progs):
        rows = []
        before = load()
        for title, prog, case, *patterns in self.CASES:
            row = {}
            for tool, pats in zip(("cautious", "memcheck", "asan"), patterns):
                argv, env, _ = self.command(tool, progs[prog][0], progs[prog][1], [case], "detect")
                rc, _, _, out, _ = self.run(argv, env, timeout=300)
                text = out + self.reports("detect")
                caught = all(re.search(p, text) for p in pats)
                # a tool that stops the program at the error (ASan) still counts
                # as catching it: its report says which error; one that
                # crashes instead has not said what was wrong
                crash = re.search(r"\b(SEGV|SIGSEGV|SIGBUS)\b", text)
                row[tool] = (caught, rc, "crashed: %s" % crash.group(1) if crash else "")
                log("detect %-18s %-9s %s (status %d)" % (case, tool, "caught" if caught else "MISSED", rc))
                if not caught and self.args.verbose:
                    log(text[-3000:])
            rows.append((title, case, row))
        return rows, before, load()

    # ---- the report -------------------------------------------------------------------

    def markdown(self, speed, memory, detect):
        a = self.args
        vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
        gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
        L = ["# Cautious mode against memcheck and ASan", "",
             "Generated by `/usr/bin/python3 bench/cautious.py --out docs/cautious.md` "
             "(repeats %d) at commit %s, %s, on %d CPUs (%s); %s, gcc %s's ASan."
             % (a.repeats, self.commit, datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), os.cpu_count(),
                cpu_model(), vg, gcc), ""]
        if speed:
            works, results, notes, failures, before, after = speed
            L += ["## Speed", "",
                  "Wall time, median of %d runs (memcheck: 1 run), and the slowdown against spry "
                  "(libspry.so preloaded into the same binary); peak RSS below. The cautious build runs "
                  "with its defaults (64 MiB quarantine, leak report at exit); memcheck with "
                  "`--leak-check=full`; ASan with leak detection. Load average (1, 5, 15 min): %s before, "
                  "%s after." % (a.repeats, before, after), "",
                  "| workload | spry | spry cautious | memcheck | ASan | memcheck / cautious |",
                  "|---|---|---|---|---|---|"]
            rss_lines = ["| workload | spry | spry cautious | memcheck | ASan |", "|---|---|---|---|---|"]
            for name in works:
                base = med(results.get((name, "spry")))
                cells, rss = [], []
                for tool in TOOLS:
                    runs = results.get((name, tool))
                    if not runs:
                        cells.append("n/a (no rebuild)" if tool == "asan" else "failed")
                        rss.append(cells[-1])
                        continue
                    t = med(runs)
                    mark = " (libasan preloaded)" if notes.get((name, tool)) == "preload" else ""
                    cells.append("%.2f s" % t + ("" if tool == "spry" else " (%.1fx)" % (t / base)) + mark)
                    rss.append("%d MiB" % (statistics.median(r[1] for r in runs) / 1024) + mark)
                mc, ca = med(results.get((name, "memcheck"))), med(results.get((name, "cautious")))
                ratio = "%.1fx" % (mc / ca) if mc and ca else "-"
                L.append("| %s | %s | %s |" % (name, " | ".join(cells), ratio))
                rss_lines.append("| %s | %s |" % (name, " | ".join(rss)))
            L += ["", "Issue 9's targets:", ""]
            for field, what in ((0, "wall time"), (2, "CPU time")):
                py = med(results.get(("python3 tests", "spry")), field)
                ca = med(results.get(("python3 tests", "cautious")), field)
                if py and ca:
                    L.append("- the cautious build under 3x spry's time on python3's tests (%s): %.1fx, %s"
                             % (what, ca / py, "met" if ca < 3 * py else "**missed**"))
                faster = []
                for name in works:
                    mc, ca = med(results.get((name, "memcheck")), field), med(results.get((name, "cautious")), field)
                    if mc and ca:
                        faster.append("%s %.1fx%s" % (name, mc / ca, "" if mc >= 10 * ca else " (**missed**)"))
                L.append("- at least 10x faster than memcheck (%s): %s" % (what, ", ".join(faster)))
            L += ["", "Peak RSS (the process's maximum resident set; memcheck's includes valgrind):", ""]
            L += rss_lines
            L += ["", "CPU time (user and system, median; less sensitive than wall time to the "
                  "machine's other jobs, which share its 2 cores), and its ratio to spry's:", "",
                  "| workload | spry | spry cautious | memcheck | ASan | memcheck / cautious |",
                  "|---|---|---|---|---|---|"]
            for name in works:
                base = med(results.get((name, "spry")), 2)
                cells = []
                for tool in TOOLS:
                    t = med(results.get((name, tool)), 2)
                    mark = " (libasan preloaded)" if notes.get((name, tool)) == "preload" else ""
                    cells.append("-" if t is None else "%.2f s" % t
                                 + ("" if tool == "spry" else " (%.1fx)" % (t / base)) + mark)
                mc, ca = med(results.get((name, "memcheck")), 2), med(results.get((name, "cautious")), 2)
                L.append("| %s | %s | %s |" % (name, " | ".join(cells), "%.1fx" % (mc / ca) if mc and ca else "-"))
            L += ["", "Workloads:", ""]
            L += ["- **%s**: %s" % (name, w[4]) for name, w in works.items()]
            L += ["", "ASan: `stl_heavy` is rebuilt with `-fsanitize=address -O2 -g`. Debian's python3 "
                  "and sqlite3 cannot be rebuilt here; their column is libasan.so preloaded into the "
                  "same binary (`verify_asan_link_order=0`): ASan's allocator with its redzones, "
                  "quarantine and leak check, but no instrumented loads and stores, so it is cheaper "
                  "than a real ASan build and catches fewer errors."]
            if failures:
                L += ["", "Runs that failed (left out of the medians):", ""] + ["- " + f for f in failures]
            L.append("")
        if memory:
            rows, before, after = memory
            L += ["## Memory per block", "",
                  "`bench/cautious_blocks.c`: %d blocks allocated and written; resident bytes per block "
                  "(growth of the resident set divided by the count, the tool's own metadata and shadow "
                  "memory included), then what stays resident once all are freed (quarantines; spry's "
                  "own figure is free pages not yet given back, which happens after "
                  "`SPRY_PURGE_DELAY_MS`, 250 ms). Load average: %s before, %s after."
                  % (a.blocks, before, after), "",
                  "| block size | spry | spry cautious | memcheck | ASan |", "|---|---|---|---|---|"]
            for size, row in rows:
                L.append("| %d B live | %s |" % (size, " | ".join(
                    "%.0f B" % row[t][0] if row[t] else "failed" for t in TOOLS)))
                L.append("| %d B after free | %s |" % (size, " | ".join(
                    "%.1f MiB" % (row[t][1] / 1024) if row[t] else "failed" for t in TOOLS)))
            L.append("")
        if detect:
            rows, before, after = detect
            L += ["## Detection", "",
                  "Each case of `tests/cautious_wrong.c` and `tests/cautious_wrong_cxx.cpp` (the "
                  "cautious build's wrong-programs suite, built -O0 -g) under each tool: caught "
                  "when the tool's report names that error on that block (its kind, its size or "
                  "offset, or for leaks the allocating function of each site). ASan: the same sources "
                  "built with `-fsanitize=address -g`, default options (it stops at the first error; "
                  "the cautious build and memcheck report and go on). Leaks: memcheck and ASan leave "
                  "out a block still reachable from a global at exit (the tests keep the last pointer "
                  "in one), so they count 4 of site b's 5 blocks; the cautious build lists every "
                  "block live at exit, as FastMM does. Load average: %s before, %s after."
                  % (before, after), "",
                  "| error | spry cautious | memcheck | ASan |", "|---|---|---|---|"]
            for title, case, row in rows:
                L.append("| %s (`%s`) | %s |" % (title, case, " | ".join(
                    "caught" if row[t][0] else "**missed**" + (" (%s)" % row[t][2] if row[t][2] else "")
                    for t in ("cautious", "memcheck", "asan"))))
            missed = {t: [title for title, _, row in rows if not row[t][0]] for t in ("cautious", "memcheck", "asan")}
            L += [""] + ["- %s misses: %s" % (TOOL_TITLE[t], ", ".join(m) if m else "none")
                         for t, m in missed.items()]
            L.append("")
        return "\n".join(L)


def leaks_only(rc, text):
    """An ASan run whose only finding is the program's leaks at exit
    (Debian's python3 leaves some): LeakSanitizer's status."""
    return rc != 0 and "ERROR: LeakSanitizer" in text and "ERROR: AddressSanitizer" not in text


def med(runs, field=0):
    """Median wall time (field 0) or CPU time (2) of a cell's runs."""
    return statistics.median(r[field] for r in runs) if runs else None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="the build tree (default: build)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per cell but memcheck's (default 3)")
    ap.add_argument("--only", default="speed,memory,detect", help="tables to make: speed,memory,detect")
    ap.add_argument("--python-tests", nargs="+", default=PY_TESTS, help="python3 test modules to run")
    ap.add_argument("--sql-rows", type=int, default=60000, help="rows the SQL script inserts")
    ap.add_argument("--blocks", type=int, default=200000, help="live blocks of the memory table")
    ap.add_argument("--out", help="write the Markdown here (default: stdout)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the reports of missed cases")
    a = ap.parse_args()
    only = set(a.only.split(","))
    for tool in ("valgrind", "gcc", "g++", "sqlite3"):
        if not shutil.which(tool):
            sys.exit("%s is missing: scripts/install-deps.sh installs it" % tool)
    if "speed" in only and subprocess.run([PY, "-c", "import test.test_re"], capture_output=True).returncode:
        sys.exit("python3's test suite is missing: scripts/install-deps.sh installs it "
                 "(Debian's libpython3.X-testsuite)")
    b = Bench(a)
    try:
        progs = b.programs()
        detect = b.detect(progs) if "detect" in only else None
        memory = b.memory(progs) if "memory" in only else None
        speed = b.speed(progs) if "speed" in only else None
        text = b.markdown(speed, memory, detect)
    finally:
        shutil.rmtree(b.work, ignore_errors=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        log("wrote " + a.out)
    else:
        print(text)


if __name__ == "__main__":
    main()

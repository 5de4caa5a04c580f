"""report.md: per test a table of every allocator's median, spry's ratio to
each peer (speed and peak RSS) with the cells where spry loses marked, the
problems (CORRUPT, failed, timeouts, preloads that did not take) at the top,
and the geometric means closing the report."""
from . import aggregate, suite

LOSS_MARK = "\u25b2"      # ▲ spry loses this cell by more than the margin


def fmt_value(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    if a == 0:
        return "0"
    return "%.3g" % v


def fmt_stat(st):
    if st.median is None:
        return None
    s = fmt_value(st.median)
    sp = st.spread_pct()
    if sp is not None and sp >= 0.5:
        s += " \u00b1%.0f%%" % sp
    return s


def fmt_ratio(r, margin=suite.LOSS_MARGIN):
    if r is None:
        return "-"
    if r > margin:
        return "**%.2f %s**" % (r, LOSS_MARK)
    return "%.2f" % r


def fmt_mib(kb):
    return None if kb is None else fmt_value(kb / 1024.0)


def _below_one(v):
    return v is not None and v < 1


def _run_state(res, test, cell, alloc):
    """Text for a cell with no ok run: the statuses of its runs."""
    runs = res.runs_of(test, cell, alloc)
    if not runs:
        return "-"
    bad = sorted({r.status for r in runs if not r.ok})
    return "**" + ", ".join(bad) + "**" if bad else "-"


def _failed_text(res, test, cell, alloc):
    """Text for a FAILED cell: FAILED, what went wrong, how many runs."""
    runs = res.runs_of(test, cell, alloc)
    bad = [r for r in runs if not r.ok and not r.status.startswith("mismatch")]
    kinds = ", ".join(sorted({r.status for r in bad}))
    share = "" if len(bad) == len(runs) else " in %d of %d runs" % (len(bad), len(runs))
    return "**FAILED** (%s%s)" % (kinds, share)


def _ratio_text(res, test, cell, r, peer, subject):
    """A ratio cell: the number, marked when spry loses, and FAILED when a
    side failed (the ratio then holds that side's penalty)."""
    if r is None:
        return "-"
    if res.failure(test, cell, subject) is not None:
        return "**FAILED %.2f %s**" % (r, LOSS_MARK)
    txt = fmt_ratio(r)
    if peer and res.failure(test, cell, peer) is not None:
        txt += " (%s FAILED)" % peer
    return txt


def _table(header, rows, text_cols=1):
    """A markdown table; the first text_cols columns left-aligned, the rest
    (numbers) right-aligned."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < text_cols else "---:" for i in range(len(header))) + "|"]
    for row in rows:
        out.append("| " + " | ".join(row) + " |")
    return out


def _value_table(res, test, metric, allocs, peers, with_ratios, rss=False, cells=None):
    """One row per cell: each allocator's median (FAILED where it failed),
    then spry's ratio to each peer and, with two peers or more, to the best
    peer of the row (named)."""
    subject = suite.SUBJECT
    header = ["cell"] + allocs
    best = with_ratios and len(peers) > 1
    if with_ratios:
        header += ["%s vs %s" % (subject, p) for p in peers]
    if best:
        header.append("%s vs %s" % (subject, "leanest" if rss else "best"))
    rows = []
    for cell in (res.cells[test] if cells is None else cells):
        row = [cell]
        for a in allocs:
            if res.failure(test, cell, a) is not None:
                row.append(_failed_text(res, test, cell, a))
                continue
            st = res.rss(test, cell, a) if rss else res.stat(test, cell, a, metric)
            txt = (fmt_mib(st.median) if rss else fmt_stat(st))
            row.append(txt if txt is not None else _run_state(res, test, cell, a))
        if with_ratios:
            for p in peers:
                r = res.rss_ratio(test, cell, p) if rss else res.time_ratio(test, cell, p)
                row.append(_ratio_text(res, test, cell, r, p, subject))
        if best:
            r, p = res.best_peer(test, cell, rss=rss)
            row.append("-" if r is None else "%s (%s)" % (_ratio_text(res, test, cell, r, None, subject), p))
        rows.append(row)
    return _table(header, rows)


def _problems_section(res, meta):
    lines = ["## Problems", ""]
    probs = res.problems()
    corrupt = [r for r in probs if r.status.startswith("CORRUPT")]
    if corrupt:
        lines += ["**\u26a0 CORRUPT: %d run(s) found a block whose contents changed under "
                  "them. That is a bug in the allocator named, not a slow cell.**" % len(corrupt), ""]
    if probs:
        lines += ["Every run that did not finish cleanly, or whose preload did not take "
                  "effect (its numbers are left out of medians and ratios):", ""]
        rows = []
        for r in probs:
            rows.append([r.test, r.cell, r.allocator, str(r.repeat), "**%s**" % r.status,
                         r.detected or "-"])
        lines += _table(["test", "cell", "allocator", "repeat", "status", "detected"], rows, 6)
        details = meta.get("failures") or []
        if details:
            lines += ["", "Last lines of stderr of the first failures (all in `logs/`):", ""]
            for d in details[:10]:
                lines.append("- `%s` %s %s: `%s`" % (d.get("test"), d.get("cell"),
                                                    d.get("allocator"),
                                                    (d.get("stderr_tail") or "").strip()
                                                    .replace("\n", " / ")[:300] or "(no stderr)"))
    else:
        lines.append("None: every run finished and every preload took effect "
                     "(each program's detected allocator matched the one preloaded).")
    lines.append("")
    failed = res.failed_cells()
    if failed:
        lines += ["**%d cell(s) FAILED** (an allocator crashed, found CORRUPT memory, timed "
                  "out, was killed or printed no result in at least one run). Each counts as a "
                  "loss for that allocator: in ratios and geometric means it takes the worst "
                  "median of the allocators that finished the cell, made %g times worse "
                  "(twice the time or RSS, half the rate). Tables show **FAILED**." % (
                      len(failed), aggregate.FAILURE_PENALTY), ""]
        by_alloc = {}
        for t, c, a, st in failed:
            by_alloc.setdefault(a, []).append("%s %s" % (t, c))
        for a, where in by_alloc.items():
            lines.append("- %s: %d FAILED cell(s): %s%s" % (a, len(where), "; ".join(where[:12]),
                                                           " ..." if len(where) > 12 else ""))
        lines.append("")
    return lines


def _pascal_targets_section(res):
    """Issue 10's targets, cell by cell: the spry unit at least 2x faster than
    the RTL heap and at least as fast as cmem, peak RSS at most cmem's."""
    subject = suite.SUBJECT
    tests = [t for t in res.tests if suite.test_info(t)["pascal"]]
    if not tests:
        return []
    lines = ["## Pascal targets (issue 10)", "",
             "The spry unit against the Free Pascal RTL heap (target: time ratio <= 0.5) and "
             "the cmem unit (time ratio <= 1, peak RSS ratio <= 1), every cell; ratios as "
             "above (%s / peer, below 1 better for %s), without the 5%% noise margin." % (
                 subject, subject), ""]
    rows, met, total = [], 0, 0
    calls = []
    for test in tests:
        allocs = res.allocators_of(test)
        if subject not in allocs:
            continue
        if test == "pascal_calls":
            # its target is MemSize from Pascal against spry_usable_size from C
            for cell in res.cells[test]:
                ms = res.stat(test, cell, subject, "memsize_ns").median
                c = res.stat(test, cell, subject, "c_usable_ns").median
                if ms and c:
                    calls.append("- MemSize from Pascal %.2f ns, spry_usable_size from C "
                                 "%.2f ns: ratio %.2f (target <= 1: %s)." % (
                                     ms, c, ms / c, "met" if ms <= c else "**missed**"))
            continue
        for cell in res.cells[test]:
            checks = []
            r = res.time_ratio(test, cell, "fpc-rtl", subject) if "fpc-rtl" in allocs else None
            checks.append((r, 0.5))
            r2 = res.time_ratio(test, cell, "cmem", subject) if "cmem" in allocs else None
            checks.append((r2, 1.0))
            r3 = res.rss_ratio(test, cell, "cmem", subject) if "cmem" in allocs else None
            checks.append((r3, 1.0))
            cols = []
            ok = True
            for v, bound in checks:
                if v is None:
                    cols.append("-")
                    ok = False
                else:
                    good = v <= bound
                    ok = ok and good
                    cols.append("%.2f%s" % (v, "" if good else " **missed**"))
            total += 1
            met += ok
            rows.append([test, cell] + cols + ["yes" if ok else "no"])
    lines += _table(["test", "cell", "time vs fpc-rtl (<= 0.5)", "time vs cmem (<= 1)",
                     "RSS vs cmem (<= 1)", "all met"], rows, 2)
    lines += ["", "All three targets met in %d of %d cells." % (met, total), ""]
    if calls:
        lines += calls + [""]
    return lines


def _summary_section(res):
    subject = suite.SUBJECT
    lines = ["## Summary: %s versus each peer (geometric means)" % subject, ""]
    summ = res.summary(subject)
    if not summ:
        lines += ["No summary: %s has no results in this run." % subject, ""]
        return lines
    lines += ["Time ratio = %s's time / the peer's time on each test's headline metric "
              "(for a rate, the peer's rate / %s's), RSS ratio = %s's peak RSS / the peer's; "
              "below 1 is better for %s. Geometric mean over each test's cells, then over "
              "the tests (each test counts once). \"best peer\" compares each cell with "
              "whichever peer did best in it (the fastest, the leanest). A FAILED cell counts "
              "as a loss for the allocator that failed (its value: the worst finisher's, "
              "%g times worse); a cell where both sides failed is left out." % (
                  subject, subject, subject, subject, aggregate.FAILURE_PENALTY), ""]
    rows = []
    for peer, s in summ.items():
        f = s.get("failed", (0, 0))
        rows.append([peer, fmt_ratio(s["time"]), fmt_ratio(s["rss"]), str(len(s["tests"])),
                     "%d / %s" % (f[0], "-" if peer == "best peer" else f[1])])
    lines += _table(["peer", "time ratio", "RSS ratio", "tests",
                     "FAILED cells (%s / peer)" % subject], rows)
    lines += ["", "Per test (time ratio / RSS ratio):", ""]
    peers = list(summ)
    rows = []
    for test in res.tests:
        if not suite.test_info(test)["peers"]:
            continue
        row = [test]
        for p in peers:
            t = summ[p]["tests"].get(test)
            row.append("%s / %s" % (fmt_ratio(t[0]), fmt_ratio(t[1])) if t else "-")
        rows.append(row)
    lines += _table(["test"] + peers, rows)
    lines.append("")

    losses = res.losses(subject)
    lines += ["### Cells where %s is slower (time ratio > %.2f)" % (subject, suite.LOSS_MARGIN), ""]
    if losses:
        lines += _table(["test", "cell", "peer", "time ratio"],
                        [[t, c, p, "%.2f%s" % (r, " (FAILED)" if res.failure(t, c, subject) else "")]
                         for t, c, p, r in losses[:40]], 3)
        if len(losses) > 40:
            lines.append("")
            lines.append("... and %d more (see the tables above)." % (len(losses) - 40))
    else:
        lines.append("None.")
    lines.append("")
    rl = res.rss_losses(subject)
    lines += ["### Cells where %s's peak RSS is higher (RSS ratio > %.2f)" % (subject, suite.LOSS_MARGIN), ""]
    if rl:
        lines += _table(["test", "cell", "peer", "RSS ratio"],
                        [[t, c, p, "%.2f" % r] for t, c, p, r in rl[:25]], 3)
        if len(rl) > 25:
            lines.append("")
            lines.append("... and %d more." % (len(rl) - 25))
    else:
        lines.append("None.")
    lines.append("")
    return lines


def _groups(res, test, info):
    """{group value: [cells]} in first-seen order; one group of every cell
    when the test has no group param."""
    if not info["group"]:
        return {"": list(res.cells[test])}
    out = {}
    for cell in res.cells[test]:
        g = str(res.cell_params[(test, cell)].get(info["group"], info["group_default"]))
        out.setdefault(g, []).append(cell)
    return out


def _chart_lines(files):
    """Charts inline; per-allocator churn surfaces as links."""
    inline = [c for c in files if not c.startswith("churn_surface_")]
    linked = [c for c in files if c.startswith("churn_surface_")]
    L = ["![%s](%s)" % (c, c) for c in inline]
    if linked:
        L += ["", "One surface per allocator: " +
              ", ".join("[%s](%s)" % (c[len("churn_surface_"):-4], c) for c in linked) + "."]
    if files:
        L.append("")
    return L


def _test_tables(res, test, info, allocs, peers, with_ratios, cells):
    L = []
    metric = res.primary(test)
    if metric:
        unit = suite.UNITS.get(metric, "")
        L += ["**%s**%s, %s is better:" % (metric, " (%s)" % unit if unit else "",
                                           suite.better(metric)), ""]
        L += _value_table(res, test, metric, allocs, peers, with_ratios, cells=cells)
        L.append("")
    L += ["**Peak RSS** (MiB), lower is better:", ""]
    L += _value_table(res, test, None, allocs, peers, with_ratios, rss=True, cells=cells)
    L.append("")
    for extra in info["extra"]:
        if extra not in res.metrics_of(test):
            continue
        unit = suite.UNITS.get(extra, "")
        L += ["%s%s:" % (extra, " (%s)" % unit if unit else ""), ""]
        L += _value_table(res, test, extra, allocs, [], False, cells=cells)
        L.append("")
    return L


def write(res, meta, charts, path):
    """Writes report.md to path. meta is the run's meta.json (may be {});
    charts maps a test name (or "summary") to the chart file names for it."""
    subject = suite.SUBJECT
    L = ["# spry benchmark report", ""]
    when = meta.get("started", "")
    L.append("- Run: %s, mode **%s**, %s repeat(s) per cell, allocators alternated cell by "
             "cell (the order rotates each repeat)." % (when or "?", meta.get("mode", "?"),
                                                        meta.get("repeats", "?")))
    mach = meta.get("machine") or {}
    if mach:
        L.append("- Machine: %s, %s CPUs, %s RAM, kernel %s." % (
            mach.get("cpu", "?"), mach.get("cpus", "?"), mach.get("ram", "?"),
            mach.get("kernel", "?")))
    if meta.get("command"):
        L.append("- Command: `%s`" % meta["command"])
    if meta.get("build"):
        L.append("- Build directory: `%s`%s" % (meta["build"], (", commit %s" % meta["commit"])
                                                if meta.get("commit") else ""))
    if str(meta.get("repeats")) == "1":
        L.append("- One run per cell and allocator: no spread is shown, and differences of "
                 "5-10% can be noise (use --repeats 3 for medians).")
    if meta.get("elapsed_s") is not None:
        L.append("- Wall time of the whole run: %.0f s." % meta["elapsed_s"])
    if meta.get("load_before") is not None:
        L.append("- Load average (1 minute) when the run started: %.2f%s; on %s CPUs." % (
            meta["load_before"], ", when it ended: %.2f" % meta["load_after"]
            if meta.get("load_after") is not None else "", mach.get("cpus", "?")))
    L += ["",
          "How to read it: values are medians over the repeats (\u00b1 half the min-max range "
          "when there are several and it is at least 0.5%%). \"%s vs X\" is a ratio with X "
          "where **below 1 is better for %s**: for times %s/X, for rates X/%s, for peak RSS "
          "%s/X. **%s** marks a cell where %s is worse by more than %d%% (seed 003: smaller "
          "differences are noise). Peak RSS is the program's own ru_maxrss (the server's "
          "VmHWM), in MiB. Same binaries, arguments and seeds for every allocator." % (
              subject, subject, subject, subject, subject, LOSS_MARK, subject,
              round((suite.LOSS_MARGIN - 1) * 100)), ""]

    L += ["## Allocators", ""]
    rows = []
    for a in meta.get("allocators", []):
        rows.append([a["name"], a["how"] if a.get("how") else
                     "`%s`" % a["path"] if a.get("path") else "(none: glibc malloc)",
                     "yes" if a.get("used") else "**skipped**: %s" % a.get("reason", "?")])
    if rows:
        L += _table(["allocator", "preloaded library", "used"], rows, 3)
    else:
        L.append("Allocators in the data: " + ", ".join(res.allocators))
    L.append("")
    skipped = meta.get("skipped_tests") or []
    if skipped:
        L += ["Tests not run:", ""]
        for s in skipped:
            L.append("- **%s**: %s" % (s["test"], s["reason"]))
        L.append("")
    for note in meta.get("notes", []):
        L.append("- " + note)
    if meta.get("notes"):
        L.append("")

    L += _problems_section(res, meta)
    L.append("The summary (geometric means, the cells %s loses) closes the report." % subject)
    L.append("")

    for i, test in enumerate(res.tests, 1):
        info = suite.test_info(test)
        allocs = res.allocators_of(test)
        with_ratios = info["peers"] and subject in allocs
        peers = [a for a in allocs if a != subject] if with_ratios else []
        L += ["## %d. %s (%s)" % (i, info["title"], suite.origin(info)), "", info["what"], ""]
        for note in (meta.get("test_notes") or {}).get(test, []):
            L.append("- " + note)
        if (meta.get("test_notes") or {}).get(test):
            L.append("")
        groups = _groups(res, test, info)
        files = charts.get(test, [])
        grouped = {g: [c for c in files if ("_%s%s_" % (info["group"], g)) in c] for g in groups} \
            if info["group"] else {}
        if grouped:     # the per-allocator surfaces are drawn for the first group
            first = list(groups)[0]
            grouped[first] += [c for c in files if c.startswith("churn_surface_")]
        ungrouped = [c for c in files if not any(c in v for v in grouped.values())]
        L += _chart_lines(ungrouped)
        for g, cells in groups.items():
            if info["group"]:
                L += ["### %s = %s" % (info["group"], g), ""]
                L += _chart_lines(grouped.get(g, []))
            L += _test_tables(res, test, info, allocs, peers, with_ratios, cells)
        if "big_ok" in res.metrics_of(test):
            refused = ["%s under %s" % (cell, a) for cell in res.cells[test] for a in allocs
                       if _below_one(res.stat(test, cell, a, "big_ok").median)]
            L += ["**The 8 MiB block was refused**: " + "; ".join(refused) + ".", ""] if refused \
                else ["The 8 MiB block was granted in every cell.", ""]
        probs = res.problems(test)
        if probs:
            L += ["Problems in this test: %d run(s), see Problems above." % len(probs), ""]

    for c in charts.get("summary", []):
        L.append("![%s](%s)" % (c, c))
    if charts.get("summary"):
        L.append("")
    L += _pascal_targets_section(res)
    L += _summary_section(res)
    if meta.get("charts_skipped"):
        L += ["", "_Charts: %s_" % meta["charts_skipped"], ""]

    with open(path, "w") as f:
        f.write("\n".join(L).rstrip() + "\n")
    return path


def churn_table(res, meta_mode=""):
    """Issue 8's grid (issue 2's table at each working set): churn Mops/s of
    every allocator and peak RSS per cell, spry's rate over the best peer's
    (the issue's convention: above 1 spry is faster; its target is >= 0.95),
    one table per live size, as markdown lines."""
    test = "churn"
    if test not in res.cells:
        return ["(no churn results)"]
    info = suite.test_info(test)
    allocs = res.allocators_of(test)
    subject = suite.SUBJECT
    has_subject = subject in allocs and len(allocs) > 1
    out = []
    for g, cells in _groups(res, test, info).items():
        out += ["## live = %s blocks per thread" % g, ""]
        header = ["band", "T", "live run"] + ["%s Mops/s" % a for a in allocs] + \
            ["%s RSS MiB" % a for a in allocs]
        if has_subject:
            header += ["%s / best peer" % subject, "target >= 0.95"]
        rows = []
        for cell in cells:
            p = res.cell_params[(test, cell)]
            live_run = p.get("live_run", p.get("live", g))
            row = [p.get("band", cell), p.get("threads", ""),
                   str(live_run) + ("" if str(live_run) == str(p.get("live", live_run))
                                    else " (scaled)")]
            for a in allocs:
                if res.failure(test, cell, a) is not None:
                    row.append(_failed_text(res, test, cell, a))
                else:
                    row.append(fmt_stat(res.stat(test, cell, a, "mops")) or
                               _run_state(res, test, cell, a))
            for a in allocs:
                row.append(fmt_mib(res.rss(test, cell, a).median) or "-")
            if has_subject:
                r, peer = res.best_peer(test, cell)
                if r is None:
                    row += ["?", "?"]
                else:
                    fail = " FAILED" if res.failure(test, cell, subject) else ""
                    row += ["%.2f (%s)%s" % (1.0 / r, peer, fail),
                            "yes" if 1.0 / r >= 0.95 and not fail else "**no**"]
            rows.append(row)
        out += _table(header, rows, 3)
        out.append("")
    return out

"""PNG charts with matplotlib (Agg backend, no display needed).

    churn_surface_<allocator>.png   the churn surface at the first working set
                                    (64 live blocks), 3D, as seed 000 drew it
    churn_live<K>_surfaces.png      per working set K: all allocators side by side,
                                    same z scale
    churn_live<K>_relative.png      per working set K: heatmaps of spry's rate over
                                    each peer's and over the best peer's of each
                                    cell (log2 colour; red where spry is slower;
                                    FAILED cells and scaled-down live sets marked)
    <test>.png                      bars (or lines) of the headline metric and
                                    peak RSS per allocator
    summary_relative.png            per test and peer, log2 of the geometric-mean
                                    speed ratio; red where spry is slower

available() says whether matplotlib can be imported; without it the report
is written without charts and says so.
"""
import math

from . import suite

COLORS = {"glibc": "#7f7f7f", "jemalloc": "#1f77b4", "tcmalloc": "#ff7f0e",
          "mimalloc": "#2ca02c", "spry": "#d62728"}
EXTRA_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def available():
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:
        return False


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _color(alloc, allocs):
    if alloc in COLORS:
        return COLORS[alloc]
    others = [a for a in allocs if a not in COLORS]
    return EXTRA_COLORS[others.index(alloc) % len(EXTRA_COLORS)]


def _save(fig, outdir, name, written):
    import os
    fig.savefig(os.path.join(outdir, name), dpi=110, bbox_inches="tight")
    _plt().close(fig)
    written.append(name)


# ---- churn ---------------------------------------------------------------

def _churn_groups(res):
    """{live size: [cells]} in first-seen order (64 for results without it)."""
    info = suite.test_info("churn")
    out = {}
    for cell in res.cells.get("churn", []):
        g = str(res.cell_params[("churn", cell)].get(info["group"], info["group_default"]))
        out.setdefault(g, []).append(cell)
    return out


def _churn_grid(res, cells):
    """Threads and bands of these churn cells, sorted, and cell lookup."""
    test = "churn"
    threads, bands, where = [], [], {}
    for cell in cells:
        p = res.cell_params[(test, cell)]
        t = suite.num(p.get("threads", 0))
        b = (suite.num(p.get("min", 0)), suite.num(p.get("max", 0)), p.get("band", cell))
        if t not in threads:
            threads.append(t)
        if b not in bands:
            bands.append(b)
        where[(t, b)] = cell
    threads.sort()
    bands.sort(key=lambda b: (b[0], b[1]))
    return threads, bands, where


def _churn_matrix(res, alloc, threads, bands, where):
    import numpy as np
    z = np.full((len(bands), len(threads)), np.nan)
    for i, b in enumerate(bands):
        for j, t in enumerate(threads):
            cell = where.get((t, b))
            if cell and res.failure("churn", cell, alloc) is None:
                m = res.stat("churn", cell, alloc, "mops").median
                if m is not None:
                    z[i, j] = m
    return z


def _surface(ax, z, threads, bands, title, zmax=None):
    import numpy as np
    X, Y = np.meshgrid(np.arange(len(threads)), np.arange(len(bands)))
    Y = len(bands) - 1 - Y          # the largest band in front
    zz = np.where(np.isnan(z), 0.0, z)
    ax.plot_surface(X, Y, zz, cmap="viridis", edgecolor="k", linewidth=0.3,
                    antialiased=True, vmin=0, vmax=zmax if zmax else None)
    ax.set_xticks(range(len(threads)))
    ax.set_xticklabels([str(t) for t in threads], fontsize=7)
    ax.set_yticks(range(len(bands)))
    ax.set_yticklabels([b[2] for b in reversed(bands)], fontsize=6)
    ax.set_xlabel("threads", fontsize=8)
    ax.set_ylabel("block sizes", fontsize=8, labelpad=12)
    ax.set_zlabel("Mops/s", fontsize=8)
    if zmax:
        ax.set_zlim(0, zmax)
    try:
        ax.set_box_aspect(None, zoom=0.88)      # room for the z label
    except TypeError:                           # matplotlib < 3.6
        pass
    ax.set_title(title, fontsize=10)
    # Small blocks (the high part of every surface) at the back, as seed
    # 000 turned its charts, so the mountain does not hide the valley.
    ax.view_init(elev=28, azim=-55)


SHORT = {"glibc": "gl", "jemalloc": "je", "tcmalloc": "tc", "mimalloc": "mi"}


def _relative(res, threads, bands, where, peer):
    """log2 of spry's rate over the peer's (or the best peer's, peer None)
    per cell, and the text to print in each cell."""
    import numpy as np
    subject = suite.SUBJECT
    lr = np.full((len(bands), len(threads)), np.nan)
    text = [["n/a"] * len(threads) for _ in bands]
    for i, b in enumerate(bands):
        for j, t in enumerate(threads):
            cell = where.get((t, b))
            if not cell:
                text[i][j] = ""
                continue
            if peer is None:
                r, who = res.best_peer("churn", cell)
            else:
                r, who = res.time_ratio("churn", cell, peer), peer
            if r is None:
                continue
            lr[i, j] = -math.log2(r)            # time ratio -> rate ratio
            p = res.cell_params[("churn", cell)]
            mark = "*" if str(p.get("live_run", p.get("live", ""))) != str(p.get("live", "")) else ""
            if res.failure("churn", cell, subject) is not None:
                text[i][j] = "FAILED"
            else:
                text[i][j] = "%.2f%s" % (1.0 / r, mark)
                if res.failure("churn", cell, who) is not None:
                    text[i][j] += "\n%s FAILED" % SHORT.get(who, who)
                elif peer is None:
                    text[i][j] += "\n" + SHORT.get(who, who)
    return lr, text


def churn_charts(res, outdir):
    import numpy as np
    plt = _plt()
    written = []
    allocs = res.allocators_of("churn")
    subject = suite.SUBJECT
    for gi, (live, cells) in enumerate(_churn_groups(res).items()):
        threads, bands, where = _churn_grid(res, cells)
        if not threads or not bands:
            continue
        mats = {a: _churn_matrix(res, a, threads, bands, where) for a in allocs}
        zmax = max([np.nanmax(m) for m in mats.values() if not np.all(np.isnan(m))] or [1.0])
        surfaces = len(threads) > 1 and len(bands) > 1
        if gi == 0 and surfaces:
            for a in allocs:
                fig = plt.figure(figsize=(7.5, 5.5))
                ax = fig.add_subplot(111, projection="3d")
                _surface(ax, mats[a], threads, bands,
                         "churn surface: %s, %s live blocks per thread\n(millions of "
                         "malloc/free pairs per second)" % (a, live))
                _save(fig, outdir, "churn_surface_%s.png" % a, written)
        if surfaces:
            n = len(allocs)
            cols = min(n, 3)
            rows = int(math.ceil(n / cols))
            fig = plt.figure(figsize=(5.2 * cols, 4.4 * rows))
            for k, a in enumerate(allocs):
                ax = fig.add_subplot(rows, cols, k + 1, projection="3d")
                _surface(ax, mats[a], threads, bands, a, zmax=zmax * 1.05)
            fig.suptitle("churn surfaces, %s live blocks per thread, same scale (Mops/s)" % live)
            _save(fig, outdir, "churn_live%s_surfaces.png" % live, written)

        if subject not in mats or len(allocs) < 2:
            continue
        peers = [a for a in allocs if a != subject]
        panels = peers + ([None] if len(peers) > 1 else [])
        rel = [_relative(res, threads, bands, where, p) for p in panels]
        finite = np.concatenate([m[np.isfinite(m)] for m, _ in rel])
        # One colour scale for all panels; beyond 8x it saturates (the
        # number is printed), so one huge ratio does not wash out the rest.
        lim = min(3.0, max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0))
        cols = min(len(panels), 3)
        rows = int(math.ceil(len(panels) / cols))
        w, h = 0.95 * len(threads) + 1.6, 0.5 * len(bands) + 1.3
        fig, axes = plt.subplots(rows, cols, figsize=(w * cols + 1.2, h * rows + 0.8), squeeze=False)
        im = None
        for k, (peer, (lr, text)) in enumerate(zip(panels, rel)):
            ax = axes[k // cols][k % cols]
            im = ax.imshow(np.ma.masked_invalid(lr), cmap="RdBu", vmin=-lim, vmax=lim,
                           aspect="auto", origin="lower")
            for i in range(len(bands)):
                for j in range(len(threads)):
                    v = lr[i, j]
                    slow = np.isfinite(v) and 2.0 ** v < 1 / suite.LOSS_MARGIN
                    ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6.5,
                            color="white" if np.isfinite(v) and abs(v) > lim * 0.6 else "black",
                            fontweight="bold" if slow or text[i][j].startswith("FAILED")
                            else "normal")
            ax.set_xticks(range(len(threads)))
            ax.set_xticklabels([str(t) for t in threads], fontsize=7)
            ax.set_yticks(range(len(bands)))
            ax.set_yticklabels([b[2] for b in bands], fontsize=7)
            if k // cols == rows - 1:
                ax.set_xlabel("threads", fontsize=8)
            if k % cols == 0:
                ax.set_ylabel("block sizes", fontsize=8)
            ax.set_title("vs %s" % (peer or "the best peer of each cell"), fontsize=9)
        for k in range(len(panels), rows * cols):
            axes[k // cols][k % cols].axis("off")
        fig.suptitle("churn, %s live blocks per thread: %s's Mops/s over each peer's (red: %s "
                     "slower, blue: faster;\nbold: slower by more than %d%%; * live set scaled "
                     "down to fit memory)" % (live, subject, subject,
                                              round((suite.LOSS_MARGIN - 1) * 100)), fontsize=10)
        fig.tight_layout(rect=(0, 0, 0.93, 0.95))
        cax = fig.add_axes([0.945, 0.1, 0.012, 0.75])
        cb = fig.colorbar(im, cax=cax)
        cb.set_label("log2(%s Mops / peer Mops)" % subject, fontsize=8)
        _save(fig, outdir, "churn_live%s_relative.png" % live, written)
    return written


# ---- the other tests -----------------------------------------------------

def _values(res, test, cells, alloc, metric, rss):
    """Medians per cell; NaN where there is none or the cell FAILED."""
    out = []
    for c in cells:
        if res.failure(test, c, alloc) is not None:
            out.append(float("nan"))
            continue
        st = res.rss(test, c, alloc) if rss else res.stat(test, c, alloc, metric)
        v = st.median
        out.append(float("nan") if v is None else (v / 1024.0 if rss else v))
    return out


def _bars(ax, res, test, metric, rss):
    import numpy as np
    cells = res.cells[test]
    allocs = res.allocators_of(test)
    n = len(allocs)
    width = 0.8 / max(n, 1)
    x = np.arange(len(cells))
    allv = []
    for k, a in enumerate(allocs):
        vals = _values(res, test, cells, a, metric, rss)
        allv += [v for v in vals if v == v and v > 0]
        ax.bar(x + (k - (n - 1) / 2) * width, vals, width, label=a, color=_color(a, allocs))
        for i, c in enumerate(cells):
            if res.failure(test, c, a) is not None:
                ax.text(x[i] + (k - (n - 1) / 2) * width, 0.02, "FAILED", rotation=90,
                        ha="center", va="bottom", fontsize=7, color=_color(a, allocs),
                        fontweight="bold", transform=ax.get_xaxis_transform())
    if allv and max(allv) / min(allv) > 50:
        ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(cells, rotation=30 if len(cells) > 3 else 0, ha="right" if len(cells) > 3 else "center",
                       fontsize=7)
    unit = "MiB" if rss else suite.UNITS.get(metric, "")
    ax.set_ylabel(("peak RSS" if rss else metric) + (" (%s)" % unit if unit else ""))
    ax.grid(axis="y", alpha=0.3)


def _line_panels(res, test, info):
    """Groups cells by the panel params: [(panel label, [(x, cell)])]."""
    groups = {}
    for cell in res.cells[test]:
        p = res.cell_params[(test, cell)]
        key = tuple("%s=%s" % (k, p.get(k, "?")) for k in info.get("panel", []))
        groups.setdefault(key, []).append((suite.num(p.get(info["x"], 0)), cell))
    out = []
    for key, pts in groups.items():
        pts.sort(key=lambda xc: xc[0])
        out.append((" ".join(key), pts))
    return out


def _lines(ax, res, test, pts, metric, rss, xname):
    allocs = res.allocators_of(test)
    xs = [x for x, _ in pts]
    for a in allocs:
        vals = _values(res, test, [c for _, c in pts], a, metric, rss)
        ax.plot(xs, vals, marker="o", markersize=3, label=a, color=_color(a, allocs),
                linewidth=2.2 if a == suite.SUBJECT else 1.2)
        failed = [x for x, c in pts if res.failure(test, c, a) is not None]
        if failed:      # FAILED points: a cross at the bottom of the panel
            ax.plot(failed, [0.03] * len(failed), "x", markersize=7, color=_color(a, allocs),
                    transform=ax.get_xaxis_transform())
    if xname == "subpools" and xs and max(xs) / max(min(xs), 1) >= 16:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs], fontsize=7)
    ax.set_xlabel(xname)
    ax.grid(alpha=0.3)


def test_chart(res, test, outdir):
    plt = _plt()
    written = []
    info = suite.test_info(test)
    metric = res.primary(test)
    if info["chart"] == "lines" and info.get("x"):
        panels = _line_panels(res, test, info)
        cols = 3 if len(panels) % 3 == 0 else min(len(panels), 4)
        rows = int(math.ceil(len(panels) / cols))
        for rss in (False, True):
            fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
            for k, (label, pts) in enumerate(panels):
                ax = axes[k // cols][k % cols]
                _lines(ax, res, test, pts, metric, rss, info["x"])
                ax.set_title(label or test, fontsize=9)
                unit = "MiB" if rss else suite.UNITS.get(metric, "")
                if k % cols == 0:
                    ax.set_ylabel(("peak RSS" if rss else metric) + (" (%s)" % unit if unit else ""))
            for k in range(len(panels), rows * cols):
                axes[k // cols][k % cols].axis("off")
            axes[0][0].legend(fontsize=7)
            what = "peak RSS (lower is better)" if rss else "%s (%s is better)" % (
                metric, suite.better(metric))
            fig.suptitle("%s: %s" % (info["title"], what))
            fig.tight_layout()
            _save(fig, outdir, "%s%s.png" % (test, "_rss" if rss else ""), written)
        return written
    ncell = len(res.cells[test])
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.9 * ncell + 3), 7.5), squeeze=False)
    if metric:
        _bars(axes[0][0], res, test, metric, False)
        axes[0][0].set_title("%s (%s is better)" % (metric, suite.better(metric)), fontsize=9)
    _bars(axes[1][0], res, test, None, True)
    axes[1][0].set_title("peak RSS (lower is better)", fontsize=9)
    axes[0][0].legend(fontsize=7, ncol=min(5, len(res.allocators_of(test))))
    fig.suptitle(info["title"])
    fig.tight_layout()
    _save(fig, outdir, "%s.png" % test, written)
    return written


def summary_chart(res, outdir):
    import numpy as np
    plt = _plt()
    written = []
    summ = res.summary()
    if not summ:
        return written
    peers = list(summ)
    tests = [t for t in res.tests if any(t in summ[p]["tests"] for p in peers)]
    if not tests:
        return written
    fig, axes = plt.subplots(1, 2, figsize=(2.2 * len(peers) * 2 + 3, 0.5 * len(tests) + 2.2))
    for ax, idx, what in ((axes[0], 0, "speed"), (axes[1], 1, "peak RSS")):
        m = np.full((len(tests), len(peers)), np.nan)
        for i, t in enumerate(tests):
            for j, p in enumerate(peers):
                v = summ[p]["tests"].get(t)
                if v and v[idx]:
                    m[i, j] = -math.log2(v[idx])     # positive: spry better
        finite = m[np.isfinite(m)]
        lim = max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
        im = ax.imshow(np.ma.masked_invalid(m), cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        for i in range(len(tests)):
            for j in range(len(peers)):
                if np.isfinite(m[i, j]):
                    r = 2.0 ** -m[i, j]
                    ax.text(j, i, "%.2f" % r, ha="center", va="center", fontsize=8,
                            color="white" if abs(m[i, j]) > 0.6 * lim else "black",
                            fontweight="bold" if r > suite.LOSS_MARGIN else "normal")
        ax.set_xticks(range(len(peers)))
        ax.set_xticklabels(peers)
        ax.set_yticks(range(len(tests)))
        ax.set_yticklabels(tests)
        ax.set_title("%s: geometric mean of %s/peer per test (red: %s worse)"
                     % (what, suite.SUBJECT, suite.SUBJECT), fontsize=9)
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.set_label("log2(peer / %s): blue = %s better" % (suite.SUBJECT, suite.SUBJECT),
                     fontsize=8)
    fig.tight_layout()
    _save(fig, outdir, "summary_relative.png", written)
    return written


def draw_all(res, outdir):
    """Draws every chart; returns {test or "summary": [file names]}."""
    out = {}
    for test in res.tests:
        if test == "churn":
            out[test] = churn_charts(res, outdir)
        else:
            out[test] = test_chart(res, test, outdir)
    out["summary"] = summary_chart(res, outdir)
    return out

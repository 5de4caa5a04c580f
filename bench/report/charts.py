"""PNG charts with matplotlib (Agg backend, no display needed).

    churn_surface_<allocator>.png   the churn surface, 3D, as seed 000 drew it
    churn_surfaces.png              all allocators side by side, same z scale
    churn_<spry>_vs_<peer>.png      relative heatmap: log2 of spry's rate over the
                                    peer's; red where spry is slower
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

def _churn_grid(res):
    """Threads and bands of the churn cells, sorted, and cell lookup."""
    test = "churn"
    threads, bands, where = [], [], {}
    for cell in res.cells.get(test, []):
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
            if cell:
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


def churn_charts(res, outdir):
    import numpy as np
    plt = _plt()
    written = []
    threads, bands, where = _churn_grid(res)
    if not threads or not bands:
        return written
    allocs = res.allocators_of("churn")
    mats = {a: _churn_matrix(res, a, threads, bands, where) for a in allocs}
    zmax = max([np.nanmax(m) for m in mats.values() if not np.all(np.isnan(m))] or [1.0])
    for a in allocs:
        fig = plt.figure(figsize=(7.5, 5.5))
        ax = fig.add_subplot(111, projection="3d")
        _surface(ax, mats[a], threads, bands,
                 "churn surface: %s (millions of malloc/free pairs per second)" % a)
        _save(fig, outdir, "churn_surface_%s.png" % a, written)
    n = len(allocs)
    cols = min(n, 3)
    rows = int(math.ceil(n / cols))
    fig = plt.figure(figsize=(5.2 * cols, 4.4 * rows))
    for k, a in enumerate(allocs):
        ax = fig.add_subplot(rows, cols, k + 1, projection="3d")
        _surface(ax, mats[a], threads, bands, a, zmax=zmax * 1.05)
    fig.suptitle("churn surfaces, same scale (Mops/s)")
    _save(fig, outdir, "churn_surfaces.png", written)

    subject = suite.SUBJECT
    if subject in mats:
        for peer in [a for a in allocs if a != subject]:
            with np.errstate(divide="ignore", invalid="ignore"):
                lr = np.log2(mats[subject] / mats[peer])
            finite = lr[np.isfinite(lr)]
            lim = max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
            fig, ax = plt.subplots(figsize=(1.1 * len(threads) + 2.5, 0.55 * len(bands) + 1.8))
            im = ax.imshow(np.ma.masked_invalid(lr), cmap="RdBu", vmin=-lim, vmax=lim,
                           aspect="auto", origin="lower")
            for i in range(len(bands)):
                for j in range(len(threads)):
                    v = lr[i, j]
                    if np.isfinite(v):
                        r = 2.0 ** v
                        ax.text(j, i, "%.2f" % r,
                                ha="center", va="center", fontsize=7,
                                color="white" if abs(v) > lim * 0.6 else "black",
                                fontweight="bold" if r < 1 / suite.LOSS_MARGIN else "normal")
                    else:
                        ax.text(j, i, "n/a", ha="center", va="center", fontsize=7)
            ax.set_xticks(range(len(threads)))
            ax.set_xticklabels([str(t) for t in threads])
            ax.set_yticks(range(len(bands)))
            ax.set_yticklabels([b[2] for b in bands])
            ax.set_xlabel("threads")
            ax.set_ylabel("block sizes")
            ax.set_title("churn: %s's Mops/s over %s's (red: %s slower, blue: faster;\n"
                         "bold: slower by more than %d%%)"
                         % (subject, peer, subject, round((suite.LOSS_MARGIN - 1) * 100)),
                         fontsize=10)
            cb = fig.colorbar(im, ax=ax)
            cb.set_label("log2(%s Mops / %s Mops)" % (subject, peer))
            _save(fig, outdir, "churn_%s_vs_%s.png" % (subject, peer), written)
    return written


# ---- the other tests -----------------------------------------------------

def _values(res, test, cells, alloc, metric, rss):
    out = []
    for c in cells:
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

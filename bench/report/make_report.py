#!/usr/bin/python3
"""Builds report.md and the PNG charts of a results directory from its
results.csv (and meta.json when present). bench/run.py calls the same code at
the end of a run; use this to redraw after editing the report code:

    /usr/bin/python3 bench/report/make_report.py results/<date>/
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from report import aggregate, charts, markdown  # noqa: E402


def build(outdir, meta=None, with_charts=True, log=print):
    """Writes report.md (and charts) in outdir; returns (report path, chart files)."""
    csv_path = os.path.join(outdir, "results.csv")
    if meta is None:
        meta_path = os.path.join(outdir, "meta.json")
        meta = {}
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
    res = aggregate.Results.load(csv_path)
    chart_files = {}
    if with_charts and charts.available():
        try:
            chart_files = charts.draw_all(res, outdir)
        except Exception as e:          # a chart must never cost the report
            meta = dict(meta, charts_skipped="drawing failed: %r" % (e,))
            log("report: charts failed: %r" % (e,))
    elif with_charts:
        meta = dict(meta, charts_skipped="matplotlib is not installed (apt-get install "
                                         "python3-matplotlib, or run scripts/install-peers.sh)")
        log("report: no charts: matplotlib is not installed")
    path = markdown.write(res, meta, chart_files, os.path.join(outdir, "report.md"))
    files = [f for fs in chart_files.values() for f in fs]
    return path, files


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: make_report.py RESULTS_DIR  (a directory holding results.csv)")
        return 0 if len(argv) == 2 else 2
    outdir = argv[1]
    if not os.path.exists(os.path.join(outdir, "results.csv")):
        print("make_report: no results.csv in %s" % outdir, file=sys.stderr)
        return 2
    path, files = build(outdir)
    print("report: %s" % path)
    print("charts: %d PNG file(s)%s" % (len(files), (": " + ", ".join(files)) if files else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

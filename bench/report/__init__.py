"""The benchmark report: results.csv -> report.md and PNG charts.

    suite      what the suite knows about tests and metrics
    aggregate  the CSV read back: medians, spreads, ratios, geometric means
    markdown   report.md
    charts     the PNG charts (matplotlib, Agg backend; optional)
    make_report.py  rebuilds a report from a results directory
"""

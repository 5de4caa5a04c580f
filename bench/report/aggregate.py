"""results.csv read back and summarised.

A run is one program execution: one (test, cell, allocator, repeat). It is
stored as one CSV row per metric, all with the run's status, detected
allocator, maxrss_kb and wall time; a run that produced nothing (failed,
CORRUPT, timeout) is one row with an empty metric.

Only runs with status "ok" feed medians and ratios; every other status is
listed as a problem, never dropped silently.
"""
import csv
import math
import statistics

from . import suite

CSV_FIELDS = ["test", "cell", "params", "allocator", "detected", "repeat", "status",
              "metric", "value", "better", "maxrss_kb", "wall_s"]


class Stat:
    """Median and spread of the ok repeats of one value."""

    def __init__(self, values):
        self.values = sorted(values)
        self.n = len(values)
        self.median = statistics.median(values) if values else None
        self.min = self.values[0] if values else None
        self.max = self.values[-1] if values else None

    def spread_pct(self):
        """Half the min..max range, as a percentage of the median."""
        if self.n < 2 or not self.median:
            return None
        return 50.0 * (self.max - self.min) / abs(self.median)


class Run:
    def __init__(self, row):
        self.test = row["test"]
        self.cell = row["cell"]
        self.params = suite.parse_params(row.get("params", ""))
        self.allocator = row["allocator"]
        self.detected = row.get("detected", "")
        self.repeat = int(row.get("repeat") or 0)
        self.status = row.get("status", "ok") or "ok"
        self.metrics = {}
        self.maxrss_kb = _float(row.get("maxrss_kb"))
        self.wall_s = _float(row.get("wall_s"))

    @property
    def ok(self):
        return self.status == "ok"


def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def geomean(values):
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


class Results:
    def __init__(self, rows):
        self.runs = {}              # (test, cell, alloc, repeat) -> Run
        self._index = None          # (test, cell, alloc) -> [Run], built lazily
        self.tests = []
        self.cells = {}             # test -> [cell labels in first-seen order]
        self.cell_params = {}       # (test, cell) -> params dict
        allocs = []
        for row in rows:
            key = (row["test"], row["cell"], row["allocator"], int(row.get("repeat") or 0))
            run = self.runs.get(key)
            if run is None:
                run = self.runs[key] = Run(row)
                if run.test not in self.tests:
                    self.tests.append(run.test)
                    self.cells[run.test] = []
                if run.cell not in self.cells[run.test]:
                    self.cells[run.test].append(run.cell)
                    self.cell_params[(run.test, run.cell)] = run.params
                if run.allocator not in allocs:
                    allocs.append(run.allocator)
            metric = row.get("metric") or ""
            value = _float(row.get("value"))
            if metric and value is not None:
                run.metrics[metric] = value
        known = [a for a in suite.ALLOCATORS if a in allocs]
        self.allocators = known + [a for a in allocs if a not in known]
        order = {t: i for i, t in enumerate(suite.TEST_ORDER)}
        self.tests.sort(key=lambda t: order.get(t, len(order)))

    @classmethod
    def load(cls, path):
        with open(path, newline="") as f:
            return cls(list(csv.DictReader(f)))

    # ---- per cell -------------------------------------------------------

    def runs_of(self, test, cell, alloc):
        if self._index is None:
            self._index = {}
            for (t, c, a, rep), r in sorted(self.runs.items(), key=lambda kv: kv[0][3]):
                self._index.setdefault((t, c, a), []).append(r)
        return self._index.get((test, cell, alloc), [])

    def allocators_of(self, test):
        present = {a for (t, _, a, _) in self.runs if t == test}
        return [a for a in self.allocators if a in present]

    def metrics_of(self, test):
        seen = []
        for (t, _, _, _), r in self.runs.items():
            if t == test:
                for m in r.metrics:
                    if m not in seen:
                        seen.append(m)
        return seen

    def primary(self, test):
        p = suite.test_info(test)["primary"]
        ms = self.metrics_of(test)
        if p in ms or not ms:
            return p
        return ms[0]

    def stat(self, test, cell, alloc, metric):
        vals = [r.metrics[metric] for r in self.runs_of(test, cell, alloc)
                if r.ok and metric in r.metrics]
        return Stat(vals)

    def rss(self, test, cell, alloc):
        vals = [r.maxrss_kb for r in self.runs_of(test, cell, alloc)
                if r.ok and r.maxrss_kb is not None and r.maxrss_kb > 0]
        return Stat(vals)

    def problems(self, test=None):
        """Runs whose status is not ok, in run order."""
        out = [r for k, r in sorted(self.runs.items(),
                                    key=lambda kv: (self.tests.index(kv[0][0]),
                                                    self.cells[kv[0][0]].index(kv[0][1]),
                                                    kv[0][3]))
               if not r.ok and (test is None or r.test == test)]
        return out

    # ---- spry versus a peer ---------------------------------------------

    def time_ratio(self, test, cell, peer, subject=suite.SUBJECT):
        """spry's time over the peer's time for the headline metric (for a
        rate, the inverse rate ratio): below 1 spry is faster."""
        metric = self.primary(test)
        if metric is None:
            return None
        s = self.stat(test, cell, subject, metric).median
        p = self.stat(test, cell, peer, metric).median
        if not s or not p or s <= 0 or p <= 0:
            return None
        return p / s if suite.better(metric) == "higher" else s / p

    def rss_ratio(self, test, cell, peer, subject=suite.SUBJECT):
        s = self.rss(test, cell, subject).median
        p = self.rss(test, cell, peer).median
        if not s or not p:
            return None
        return s / p

    def peers(self, subject=suite.SUBJECT):
        return [a for a in self.allocators if a != subject]

    def summary(self, subject=suite.SUBJECT):
        """Geometric means of spry's time and RSS ratios: per test (over its
        cells) and overall (over the tests' means, so a test with many cells
        does not outweigh the others). Returns
        {peer: {"tests": {test: (time_gm, rss_gm, ncells)}, "time": gm, "rss": gm}}."""
        out = {}
        if subject not in self.allocators:
            return out
        for peer in self.peers(subject):
            per_test = {}
            for test in self.tests:
                if not suite.test_info(test)["peers"]:
                    continue
                tr = [self.time_ratio(test, c, peer, subject) for c in self.cells[test]]
                rr = [self.rss_ratio(test, c, peer, subject) for c in self.cells[test]]
                n = sum(1 for v in tr if v)
                if n == 0 and not any(rr):
                    continue
                per_test[test] = (geomean(tr), geomean(rr), n)
            out[peer] = {
                "tests": per_test,
                "time": geomean([v[0] for v in per_test.values()]),
                "rss": geomean([v[1] for v in per_test.values()]),
            }
        return out

    def losses(self, subject=suite.SUBJECT, margin=suite.LOSS_MARGIN):
        """Cells where spry is slower than a peer by more than the margin:
        [(test, cell, peer, ratio)], worst first."""
        out = []
        for test in self.tests:
            for cell in self.cells[test]:
                for peer in self.peers(subject):
                    r = self.time_ratio(test, cell, peer, subject)
                    if r is not None and r > margin:
                        out.append((test, cell, peer, r))
        out.sort(key=lambda x: -x[3])
        return out

    def rss_losses(self, subject=suite.SUBJECT, margin=suite.LOSS_MARGIN):
        out = []
        for test in self.tests:
            for cell in self.cells[test]:
                for peer in self.peers(subject):
                    r = self.rss_ratio(test, cell, peer, subject)
                    if r is not None and r > margin:
                        out.append((test, cell, peer, r))
        out.sort(key=lambda x: -x[3])
        return out

"""results.csv read back and summarised.

A run is one program execution: one (test, cell, allocator, repeat). It is
stored as one CSV row per metric, all with the run's status, detected
allocator, maxrss_kb and wall time; a run that produced nothing (failed,
CORRUPT, timeout) is one row with an empty metric.

Only runs with status "ok" feed medians; every other status is listed as a
problem, never dropped silently.

Failures count as losses. A cell FAILED for an allocator when any of its
runs there crashed, found CORRUPT memory, timed out, was killed or printed
no result (a "mismatch", a preload that did not take, is the machine's
problem, not the allocator's: it is listed, not counted). In ratios and
geometric means a FAILED cell takes the penalty value: the worst median of
the allocators that did not fail in that cell, made FAILURE_PENALTY times
worse (times 2 for a time or an RSS, halved for a rate). So a failure never
drops out of a geometric mean and always costs more than the slowest
finisher. When both sides of a ratio failed it has no value.
"""
import csv
import math
import statistics

from . import suite

# How much worse than the worst finisher a FAILED cell counts.
FAILURE_PENALTY = 2.0

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
        known = [a for a in suite.ORDER if a in allocs]
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

    def failure(self, test, cell, alloc):
        """The status of this allocator's first failed run in the cell (crash,
        CORRUPT, timeout, ...), or None. Mismatches are not failures."""
        for r in self.runs_of(test, cell, alloc):
            if not r.ok and not r.status.startswith("mismatch"):
                return r.status
        return None

    def effective(self, test, cell, alloc, metric, rss=False):
        """(value, failed) of an allocator in a cell as ratios use it: its
        median, or when the cell FAILED for it the penalty (the worst median
        among the allocators that did not fail, FAILURE_PENALTY times worse;
        None when nobody finished)."""
        if self.failure(test, cell, alloc) is None:
            st = self.rss(test, cell, alloc) if rss else self.stat(test, cell, alloc, metric)
            return st.median, False
        others = []
        for a in self.allocators_of(test):
            if a == alloc or self.failure(test, cell, a) is not None:
                continue
            st = self.rss(test, cell, a) if rss else self.stat(test, cell, a, metric)
            if st.median is not None and st.median > 0:
                others.append(st.median)
        if not others:
            return None, True
        if not rss and suite.better(metric) == "higher":
            return min(others) / FAILURE_PENALTY, True
        return max(others) * FAILURE_PENALTY, True

    def failed_cells(self, test=None):
        """[(test, cell, allocator, status)] of every FAILED cell, in order."""
        out = []
        for t in self.tests:
            if test is not None and t != test:
                continue
            for cell in self.cells[t]:
                for a in self.allocators_of(t):
                    st = self.failure(t, cell, a)
                    if st is not None:
                        out.append((t, cell, a, st))
        return out

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
        rate, the inverse rate ratio): below 1 spry is faster. A FAILED side
        takes its penalty value; None when both failed or a side has no data."""
        metric = self.primary(test)
        if metric is None:
            return None
        s, sf = self.effective(test, cell, subject, metric)
        p, pf = self.effective(test, cell, peer, metric)
        if (sf and pf) or not s or not p or s <= 0 or p <= 0:
            return None
        return p / s if suite.better(metric) == "higher" else s / p

    def rss_ratio(self, test, cell, peer, subject=suite.SUBJECT):
        s, sf = self.effective(test, cell, subject, None, rss=True)
        p, pf = self.effective(test, cell, peer, None, rss=True)
        if (sf and pf) or not s or not p:
            return None
        return s / p

    def best_peer(self, test, cell, subject=suite.SUBJECT, rss=False):
        """(ratio, peer) against the best peer of the cell: the largest of
        spry's ratios (the fastest peer, or the leanest for rss), or
        (None, None) when no ratio exists."""
        best = (None, None)
        for peer in self.peers(subject):
            if peer not in self.allocators_of(test):
                continue
            r = (self.rss_ratio if rss else self.time_ratio)(test, cell, peer, subject)
            if r is not None and (best[0] is None or r > best[0]):
                best = (r, peer)
        return best

    def peers(self, subject=suite.SUBJECT):
        return [a for a in self.allocators if a != subject]

    def summary(self, subject=suite.SUBJECT):
        """Geometric means of spry's time and RSS ratios: per test (over its
        cells) and overall (over the tests' means, so a test with many cells
        does not outweigh the others). FAILED cells count with their penalty
        (see the module's comment). Returns {peer: {"tests": {test: (time_gm,
        rss_gm, ncells)}, "time": gm, "rss": gm, "failed": (cells FAILED for
        spry, cells FAILED for the peer)}}, and under the key "best peer" the
        same against the best peer of each cell."""
        out = {}
        if subject not in self.allocators:
            return out
        for peer in self.peers(subject) + ["best peer"]:
            per_test = {}
            failed = [0, 0]
            for test in self.tests:
                if not suite.test_info(test)["peers"]:
                    continue
                if peer == "best peer":
                    tr = [self.best_peer(test, c, subject)[0] for c in self.cells[test]]
                    rr = [self.best_peer(test, c, subject, rss=True)[0] for c in self.cells[test]]
                else:
                    if peer not in self.allocators_of(test):
                        continue
                    tr = [self.time_ratio(test, c, peer, subject) for c in self.cells[test]]
                    rr = [self.rss_ratio(test, c, peer, subject) for c in self.cells[test]]
                n = sum(1 for v in tr if v)
                if n == 0 and not any(rr):
                    continue
                per_test[test] = (geomean(tr), geomean(rr), n)
                for c in self.cells[test]:
                    if self.failure(test, c, subject) is not None:
                        failed[0] += 1
                    if peer != "best peer" and self.failure(test, c, peer) is not None:
                        failed[1] += 1
            if not per_test:
                continue
            out[peer] = {
                "tests": per_test,
                "time": geomean([v[0] for v in per_test.values()]),
                "rss": geomean([v[1] for v in per_test.values()]),
                "failed": tuple(failed),
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

#!/usr/bin/env python3
"""Summarizes a JMH JSON result file: the median of the measurement iterations and their spread
(min..max), one line per benchmark and parameter set. Usage: summarize.py results.json"""
import json
import statistics
import sys


def main(path):
    rows = []
    for result in json.load(open(path)):
        name = result["benchmark"].rsplit(".", 2)
        params = " ".join(f"{k}={v}" for k, v in (result.get("params") or {}).items())
        values = [v for fork in result["primaryMetric"]["rawData"] for v in fork]
        rows.append((name[-2] + "." + name[-1], params, statistics.median(values), min(values), max(values),
                     result["primaryMetric"]["scoreUnit"]))
    width = max(len(r[0]) + len(r[1]) for r in rows) + 2
    print(f"{'benchmark':<{width}} {'median':>12} {'min':>12} {'max':>12}  unit")
    for bench, params, median, low, high, unit in rows:
        print(f"{bench + ' ' + params:<{width}} {median:12.3f} {low:12.3f} {high:12.3f}  {unit}")


if __name__ == "__main__":
    main(sys.argv[1])

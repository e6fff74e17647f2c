#!/usr/bin/env python3
"""Prints a markdown table of one metric from `ftl-sim compare --json` files.

usage: table.py METRIC FILE... ; each FILE is a JSON array of reports (one per configuration);
rows are files, columns are configurations, cells are the metric and its ratio to the first
configuration."""
import json
import os
import sys


def metric(report, name):
    if name == "response_mean":
        r, w = report["read_latency_us"], report["write_latency_us"]
        n = r["count"] + w["count"]
        return (r["mean"] * r["count"] + w["mean"] * w["count"]) / n if n else 0.0
    if "." in name:
        a, b = name.split(".", 1)
        return report[a][b]
    return report[name]


def main():
    name, files = sys.argv[1], sys.argv[2:]
    header = None
    for f in files:
        reports = json.load(open(f))
        if header is None:
            header = [r["label"] for r in reports]
            print("| input | " + " | ".join(header) + " |")
            print("|---" * (len(header) + 1) + "|")
        base = metric(reports[0], name)
        cells = []
        for r in reports:
            v = metric(r, name)
            rel = f" ({v / base:.3f})" if base else ""
            cells.append(f"{v:.3f}{rel}")
        print(f"| {os.path.splitext(os.path.basename(f))[0]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

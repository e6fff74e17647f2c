#!/usr/bin/env python3
"""Issue #6's table: per input and over-provisioning, erasures and mean response time (reads and
writes together) of second writes with and without prefetching and with same-plane pairs,
relative to first writes only, with the share of host pages written as second writes. Reads the JSON reports of
scripts/eval/wom.sh (each a list: baseline, wom, wom-noprefetch and, if run, wom-sameplane)."""
import json
import os
import sys


def mean_all(r):
    rl, wl = r["read_latency_us"], r["write_latency_us"]
    n = rl["count"] + wl["count"]
    return (rl["mean"] * rl["count"] + wl["mean"] * wl["count"]) / n if n else 0.0


def rel(a, b):
    return f"{a / b:.3f}" if b else "-"


rows = []
for path in sys.argv[1:]:
    reports = {r["label"]: r for r in json.load(open(path))}
    base, wom, nopf = reports["baseline"], reports["wom"], reports["wom-noprefetch"]
    same = reports.get("wom-sameplane")
    name = os.path.basename(path)[: -len(".json")]
    inp, op = name.rsplit("-op", 1)
    w = wom["features"]["wom"]
    share = w["second_writes"] / wom["host_write_pages"] if wom["host_write_pages"] else 0
    rows.append(
        (
            int(op),
            inp,
            base["device"]["blocks"],
            base["nand_erases"],
            rel(wom["nand_erases"], base["nand_erases"]),
            rel(nopf["nand_erases"], base["nand_erases"]),
            f"{mean_all(base):.0f}",
            rel(mean_all(wom), mean_all(base)),
            rel(mean_all(nopf), mean_all(base)),
            rel(same["nand_erases"], base["nand_erases"]) if same else "-",
            rel(mean_all(same), mean_all(base)) if same else "-",
            f"{share:.1%}",
            f"{w['prefetch_hits'] / max(1, w['prefetch_hits'] + w['prefetch_misses']):.0%}",
        )
    )
rows.sort()
print("| OP | input | blocks | erasures (baseline) | rel. erasures wom | rel. erasures no prefetch "
      "| mean response us (baseline) | rel. response wom | rel. response no prefetch "
      "| rel. erasures same plane | rel. response same plane "
      "| host pages as second writes | pairs prefetched |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")

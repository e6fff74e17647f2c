#!/usr/bin/env python3
"""Table and plot of issue #10's evaluation (CDM vs NVM-basic vs no cache).

usage: cdm_table.py RUNS OUT ; reads RUNS/{jedec,oltp,tpcc}-PCT-sSEED.json (written by
scripts/eval/cdm.sh; each a JSON array of the reports of baseline, nvm-basic and cdm), writes the
markdown table to OUT/results.md (and stdout), the runs' key figures to OUT/runs.json and
OUT/waf_vs_cache.svg (change of CDM against NVM-basic over the cache size: means over the seeds, the WAF's
range as whiskers, the talk's WAF range shaded)."""
import glob
import json
import math
import os
import re
import sys

WORKLOADS = [("jedec", "JEDEC-like client"), ("oltp", "OLTP-like synthetic"), ("tpcc", "TPC-C trace (OLTP)")]
# The talk's WAF reductions of CDM against NVM-basic (percent, over its cache sizes).
TALK_WAF = {"jedec": (2.1, 17.6), "oltp": (4.3, 38.2), "tpcc": (4.3, 38.2)}


def overall(report):
    """Mean and population standard deviation of all requests' response times (us)."""
    groups = [report["read_latency_us"], report["write_latency_us"]]
    n = sum(g["count"] for g in groups)
    if n == 0:
        return 0.0, 0.0
    mean = sum(g["mean"] * g["count"] for g in groups) / n
    ex2 = sum(g["count"] * (g["stddev"] ** 2 + g["mean"] ** 2) for g in groups) / n
    return mean, math.sqrt(max(ex2 - mean * mean, 0.0))


def load(d):
    """{workload: [(pct, [reports by label, one per seed])]}"""
    rows = {}
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        m = re.match(r"([a-z]+)-(\d+(?:\.\d+)?)-s(\d+)\.json$", os.path.basename(f))
        if not m:
            continue
        reports = {r["label"]: r for r in json.load(open(f))}
        clean = os.path.join(d, f"{m.group(1)}-clean-{m.group(2)}-s{m.group(3)}.json")
        if os.path.exists(clean):
            reports["cdm-clean"] = json.load(open(clean))[0]
        rows.setdefault(m.group(1), {}).setdefault(float(m.group(2)), []).append(reports)
    return {k: sorted(v.items()) for k, v in rows.items()}


def change(new, old):
    return (new / old - 1.0) * 100.0 if old else 0.0


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def cell(xs):
    """Mean change and its range over the seeds."""
    return f"{mean(xs):+.1f}% ({min(xs):+.1f}..{max(xs):+.1f})"


def table(rows):
    out = []
    out.append(
        "| workload | cache (% of logical) | cache pages | seeds | WAF none | WAF basic | WAF cdm "
        "| WAF cdm vs basic | resp. mean basic (us) | resp. mean cdm (us) | mean cdm vs basic "
        "| resp. stddev basic (us) | resp. stddev cdm (us) | stddev cdm vs basic | read hit ratio "
        "| removable drops | write-backs | clean fill: WAF vs basic | clean fill: mean vs basic "
        "| clean fill: stddev vs basic |"
    )
    out.append("|---" * 20 + "|")
    series = {}
    for key, name in WORKLOADS:
        for pct, runs in rows.get(key, []):
            dw, dm, ds = [], [], []
            cw, cm, cs = [], [], []
            acc = {k: [] for k in ["wn", "wb", "wc", "mb", "mc", "sb", "sc", "hit", "drops", "wbk"]}
            for r in runs:
                none, basic, cdm = r["baseline"], r["nvm-basic"], r["cdm"]
                mb, sb = overall(basic)
                mc, sc = overall(cdm)
                c = cdm["features"]["cdm"]
                if "cdm-clean" in r:
                    cl = r["cdm-clean"]
                    mcl, scl = overall(cl)
                    cw.append(change(cl["waf"], basic["waf"]))
                    cm.append(change(mcl, mb))
                    cs.append(change(scl, sb))
                dw.append(change(cdm["waf"], basic["waf"]))
                dm.append(change(mc, mb))
                ds.append(change(sc, sb))
                for k, v in [("wn", none["waf"]), ("wb", basic["waf"]), ("wc", cdm["waf"]), ("mb", mb),
                             ("mc", mc), ("sb", sb), ("sc", sc), ("hit", c["read_hit_ratio"]),
                             ("drops", c["removable_drops"]), ("wbk", c["write_backs"])]:
                    acc[k].append(v)
            pages = runs[0]["cdm"]["features"]["cdm"]["cache_pages"]
            a = {k: mean(v) for k, v in acc.items()}
            series.setdefault(key, []).append(
                (pct, mean(dw), mean(dm), mean(ds), min(dw), max(dw), mean(cw) if cw else None))
            same = "same as lru (write-only)" if key == "jedec" else "-"
            out.append(
                f"| {name} | {pct:g} | {pages} | {len(runs)} | {a['wn']:.3f} | {a['wb']:.3f} | {a['wc']:.3f} | "
                f"{cell(dw)} | {a['mb']:.0f} | {a['mc']:.0f} | {cell(dm)} | {a['sb']:.0f} | {a['sc']:.0f} | "
                f"{cell(ds)} | {a['hit']:.3f} | {a['drops']:.0f} | {a['wbk']:.0f} | "
                + (f"{cell(cw)} | {cell(cm)} | {cell(cs)} |" if cw else f"{same} | | |")
            )
    out.append("")
    out.append("Values are means over the seeds; changes are CDM against NVM-basic per seed, mean (min..max). "
               "Response times are over all requests (reads and writes), closed loop at queue depth 1. "
               "CDM runs with the default read fill (lru: a read miss evicts the LRU slot, writing it back "
               "first if it is an only copy); the last three columns are CDM with --nv-read-fill clean "
               "(reads never write back).")
    out.append("")
    out.append("The talk (CDM against NVM-basic): WAF -2.1..-17.6% (JEDEC), -4.3..-38.2% (OLTP); mean "
               "response time -9.7% / -20.3%; response-time standard deviation -31% / -39%.")
    return "\n".join(out), series


def svg(series, path):
    w, h, pad = 440, 320, 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(WORKLOADS) * w}" height="{h + 40}" '
             f'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>']
    colors = {"WAF": "#1f77b4", "mean response": "#2ca02c", "response stddev": "#d62728",
              "WAF, clean read fill": "#9467bd"}
    for i, (key, name) in enumerate(WORKLOADS):
        pts = series.get(key, [])
        if not pts:
            continue
        x0 = i * w
        xs = [p[0] for p in pts]
        ys = [v for p in pts for v in p[1:] if v is not None] + [-TALK_WAF[key][1], 0.0, 5.0]
        ymin, ymax = math.floor(min(ys) / 10) * 10, math.ceil(max(ys) / 10) * 10
        lx = lambda x: x0 + pad + (math.log(x) - math.log(xs[0])) / ((math.log(xs[-1]) - math.log(xs[0])) or 1) * (w - 2 * pad)
        ly = lambda y: 20 + (ymax - y) / ((ymax - ymin) or 1) * (h - pad - 20)
        lo, hi = TALK_WAF[key]
        parts.append(f'<rect x="{x0 + pad}" y="{ly(-lo)}" width="{w - 2 * pad}" height="{ly(-hi) - ly(-lo)}" '
                     f'fill="#1f77b4" opacity="0.12"/>')
        parts.append(f'<text x="{x0 + pad + 4}" y="{ly(-lo) + 14}" fill="#1f77b4">talk: WAF -{lo}..-{hi}%</text>')
        parts.append(f'<line x1="{x0 + pad}" y1="{ly(0)}" x2="{x0 + w - pad}" y2="{ly(0)}" stroke="#888"/>')
        parts.append(f'<line x1="{x0 + pad}" y1="20" x2="{x0 + pad}" y2="{h - pad}" stroke="#000"/>')
        parts.append(f'<line x1="{x0 + pad}" y1="{h - pad}" x2="{x0 + w - pad}" y2="{h - pad}" stroke="#000"/>')
        for y in range(int(ymin), int(ymax) + 1, 10):
            parts.append(f'<text x="{x0 + pad - 6}" y="{ly(y) + 4}" text-anchor="end">{y}%</text>')
        for x in xs:
            parts.append(f'<text x="{lx(x)}" y="{h - pad + 16}" text-anchor="middle">{x:g}%</text>')
        parts.append(f'<text x="{x0 + w / 2}" y="{h - 12}" text-anchor="middle">NV cache, % of logical capacity</text>')
        parts.append(f'<text x="{x0 + w / 2}" y="14" text-anchor="middle" font-weight="bold">{name}: CDM vs NVM-basic</text>')
        for p in pts:
            parts.append(f'<line x1="{lx(p[0]):.1f}" y1="{ly(p[4]):.1f}" x2="{lx(p[0]):.1f}" y2="{ly(p[5]):.1f}" '
                         f'stroke="{colors["WAF"]}" stroke-width="1"/>')
        for j, label in enumerate(["WAF", "mean response", "response stddev"]):
            pl = " ".join(f"{lx(p[0]):.1f},{ly(p[1 + j]):.1f}" for p in pts)
            parts.append(f'<polyline points="{pl}" fill="none" stroke="{colors[label]}" stroke-width="2"/>')
            for p in pts:
                parts.append(f'<circle cx="{lx(p[0]):.1f}" cy="{ly(p[1 + j]):.1f}" r="3" fill="{colors[label]}"/>')
            parts.append(f'<text x="{x0 + pad + 8}" y="{h - pad - 50 + 14 * j}" fill="{colors[label]}">{label}</text>')
        clean = [p for p in pts if p[6] is not None]
        if clean:
            pl = " ".join(f"{lx(p[0]):.1f},{ly(p[6]):.1f}" for p in clean)
            c = colors["WAF, clean read fill"]
            parts.append(f'<polyline points="{pl}" fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="5,3"/>')
            parts.append(f'<text x="{x0 + pad + 8}" y="{h - pad - 8}" fill="{c}">WAF, clean read fill</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def summary(rows):
    """The runs behind the table, compact: per workload, cache size and seed, each configuration's
    WAF, programs, copies, response times and cdm object."""
    keep = ["waf", "host_write_pages", "host_read_pages", "nand_programs", "nand_erases", "gc_page_copies",
            "read_latency_us", "write_latency_us"]
    out = {}
    for key, runs in rows.items():
        for pct, seeds in runs:
            out.setdefault(key, {})[f"{pct:g}"] = [
                {label: {**{k: r[k] for k in keep}, "cdm": r["features"].get("cdm")} for label, r in s.items()}
                for s in seeds
            ]
    return out


def main():
    runs, out = sys.argv[1], sys.argv[2]
    rows = load(runs)
    text, series = table(rows)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "runs.json"), "w") as f:
        json.dump(summary(rows), f, sort_keys=True)
        f.write("\n")
    svg(series, os.path.join(out, "waf_vs_cache.svg"))
    print(text)


if __name__ == "__main__":
    main()

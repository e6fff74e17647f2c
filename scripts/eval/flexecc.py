#!/usr/bin/env python3
"""Tables and SVG plots of the FlexECC evaluation (scripts/eval/flexecc.sh).

usage: flexecc.py DIR ; DIR holds NAME.all-bch.json and NAME.flex.json pairs (ftl-sim run --json).
Writes DIR/README.md (tables) and DIR/relative.svg, DIR/rber.svg; prints the tables."""
import glob
import json
import os
import sys

PAPER = {"r90": "-63.5%", "r90-uniform": "-63.5%", "r75": "-49%", "mixed50": "~-30% (file/mail/web/OLTP: -28.5..-30.8%)",
         "fiu-mail": "-30.1% (mail server)", "heimdall-1370": "~-30% (mixed)", "tpcc": "-28.5% (OLTP)"}


def load(d, name):
    return [json.load(open(os.path.join(d, f"{name}.{m}.json"))) for m in ("all-bch", "flex")]


def f(r):
    return r["features"]["flex_ecc"]


def pct(a, b):
    return (b / a - 1.0) * 100.0 if a else 0.0


def names(d):
    out = []
    for p in sorted(glob.glob(os.path.join(d, "*.all-bch.json"))):
        n = os.path.basename(p)[: -len(".all-bch.json")]
        if os.path.exists(os.path.join(d, f"{n}.flex.json")):
            out.append(n)
    return out


def main_table(d, rows):
    lines = [
        "| workload | t (fast: 5 ns/B bus) | read hits (CRC share) | host read mean us: all-BCH / FlexECC (change) | host read p99 | "
        "device response mean us (change) | device read p99 | GC time ms (change) | BCH->CRC in GC | paper |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rel = []
    for n in rows:
        b, x = load(d, n)
        fb, fx = f(b), f(x)
        hits = fx["read_hits"]
        crc = fx["crc_reads"] / max(1, fx["crc_reads"] + fx["bch_reads"])
        hr = (b["read_latency_us"]["mean"], x["read_latency_us"]["mean"])
        hp = (b["read_latency_us"]["p99"], x["read_latency_us"]["p99"])
        dv = (fb["device_latency_us"]["mean"], fx["device_latency_us"]["mean"])
        dp = (fb["device_read_latency_us"]["p99"], fx["device_read_latency_us"]["p99"])
        gc = (fb["gc_time_ms"], fx["gc_time_ms"])
        base, t = n.rsplit("-t", 1)
        lines.append(
            f"| {base} | {t} | {hits} ({crc:.0%}) | {hr[0]:.1f} / {hr[1]:.1f} ({pct(*hr):+.1f}%) | "
            f"{hp[0]:.0f} / {hp[1]:.0f} | {dv[0]:.1f} / {dv[1]:.1f} ({pct(*dv):+.1f}%) | {dp[0]:.0f} / {dp[1]:.0f} | "
            f"{gc[0]:.0f} / {gc[1]:.0f} ({pct(*gc):+.1f}%) | {fx['gc_bch_to_crc']} | {PAPER.get(base, '')} |"
        )
        rel.append((f"{base} t={t}", hr[1] / hr[0] if hr[0] else 1, dv[1] / dv[0] if dv[0] else 1))
    return lines, rel


def rber_table(d):
    rows = sorted((n for n in names(d) if "rber" in n), key=lambda n: float(n.split("rber")[1]))
    if not rows:
        return [], []
    b0, _ = load(d, "r90-t6")
    ref = f(b0)["device_latency_us"]["mean"]
    ref_host = b0["read_latency_us"]["mean"]
    lines = [
        "| RBER | raw errors | device response, normalised to error-free all-BCH: all-BCH / FlexECC | "
        "host read mean us: all-BCH / FlexECC | CRC pages served from disk on the read path | scrubber: verified / found / prefetched | BCH refreshed | BCH uncorrectable (dirty) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pts = [(0.0, 1.0, f(load(d, "r90-t6")[1])["device_latency_us"]["mean"] / ref)]
    for n in rows:
        b, x = load(d, n)
        fb, fx = f(b), f(x)
        rb = float(n.split("rber")[1])
        nb, nx = fb["device_latency_us"]["mean"] / ref, fx["device_latency_us"]["mean"] / ref
        pts.append((rb, nb, nx))
        lines.append(
            f"| {rb:g} | {fx['raw_bit_errors']} | {nb:.3f} / {nx:.3f} | {b['read_latency_us']['mean']:.1f} / "
            f"{x['read_latency_us']['mean']:.1f} | {fx['crc_corrupt_served_from_disk']} | "
            f"{fx['scrub_verified']} / {fx['scrub_corrupt_found']} / {fx['scrub_prefetched']} | "
            f"{fb['refreshed']} / {fx['refreshed']} | {fb['bch_uncorrectable_dirty']} / {fx['bch_uncorrectable_dirty']} |"
        )
    lines.append("")
    lines.append(f"(error-free all-BCH reference: device response {ref:.1f} us, host read {ref_host:.1f} us)")
    return lines, pts


def svg_bars(path, rel):
    w, h, left, top, bar = 760, 60 + 34 * len(rel), 220, 30, 12
    scale = 420.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="18">FlexECC / all-BCH, mean response time (1.0 = equal; lower is better)</text>']
    x1 = left + scale
    out.append(f'<line x1="{x1}" y1="{top}" x2="{x1}" y2="{h - 20}" stroke="#000" stroke-dasharray="4"/>')
    out.append(f'<text x="{x1 - 8}" y="{h - 6}">1.0</text>')
    for i, (label, host, dev) in enumerate(rel):
        y = top + 34 * i
        out.append(f'<text x="{left - 6}" y="{y + 16}" text-anchor="end">{label}</text>')
        for j, (v, col, name) in enumerate([(host, "#4477aa", "host read"), (dev, "#ee6677", "device")]):
            out.append(f'<rect x="{left}" y="{y + j * bar}" width="{v * scale:.1f}" height="{bar - 1}" fill="{col}"/>')
            out.append(f'<text x="{left + v * scale + 4:.1f}" y="{y + j * bar + 10}">{v:.3f}</text>')
    out.append(f'<rect x="{w - 170}" y="{h - 40}" width="10" height="10" fill="#4477aa"/><text x="{w - 155}" y="{h - 31}">host read</text>')
    out.append(f'<rect x="{w - 170}" y="{h - 24}" width="10" height="10" fill="#ee6677"/><text x="{w - 155}" y="{h - 15}">device, all requests</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def svg_rber(path, pts):
    import math
    w, h, left, top, pw, ph = 640, 360, 70, 30, 520, 270
    xs = [p[0] for p in pts if p[0] > 0]
    lo, hi = math.log10(min(xs)) - 1, math.log10(max(xs))
    ymax = max(max(p[1], p[2]) for p in pts) * 1.1
    def X(r):
        return left + pw * ((math.log10(r) if r > 0 else lo) - lo) / (hi - lo)
    def Y(v):
        return top + ph * (1 - v / ymax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="18">R90, t = 6: device response normalised to error-free all-BCH vs RBER</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#000"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#000"/>']
    for r in [p[0] for p in pts]:
        out.append(f'<text x="{X(r):.1f}" y="{top + ph + 16}" text-anchor="middle">{("0" if r == 0 else f"{r:g}")}</text>')
    for k in range(6):
        v = ymax * k / 5
        out.append(f'<text x="{left - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for idx, col, name in [(1, "#4477aa", "all-BCH"), (2, "#ee6677", "FlexECC")]:
        pl = " ".join(f"{X(p[0]):.1f},{Y(p[idx]):.1f}" for p in pts)
        out.append(f'<polyline points="{pl}" fill="none" stroke="{col}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw - 80}" y="{top + 14 + 16 * idx}" fill="{col}">{name}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    d = sys.argv[1]
    rows = [n for n in names(d) if "rber" not in n]
    order = ["r90", "r75", "mixed50", "r90-uniform", "fiu-mail", "heimdall-1370", "tpcc"]
    torder = ["6", "40", "6fast"]
    def key(n):
        base, t = n.rsplit("-t", 1)
        return (torder.index(t) if t in torder else 9, order.index(base) if base in order else 99)
    rows.sort(key=key)
    t1, rel = main_table(d, rows)
    t2, pts = rber_table(d)
    svg_bars(os.path.join(d, "relative.svg"), rel)
    if pts:
        svg_rber(os.path.join(d, "rber.svg"), pts)
    intro = [
        "Setup: `ftl-sim run --features flex-ecc --ecc all-bch|flex` (see the script for every flag).",
        "A write-back LRU cache manager over the simulated SSD turns each workload into dirty writes",
        "(host writes), clean writes (fills of read misses from a 1.5 ms disk), host reads (hits) and",
        "flush-reads (dirty victims, and all dirty pages every 5 s). Device: CAFTL timings (tR 25 us,",
        "tPROG 200 us, tBERS 1.5 ms, 20 ns per byte; `fast`: 5 ns per byte), 4 KiB pages, 1024 blocks.",
        "Decode: CRC check 1.67 us, BCH t x that clean and 2t x with errors (t = 6: the paper's 10 us).",
        "Synthetic: zipf:1 over 12 cache sizes, cache 46,000 pages (75% of the logical space), 1 ms mean",
        "gap, first 50,000 requests unmeasured; r90-uniform: uniform over 2 cache sizes, 2 ms mean gap. Traces: replayed 3 times, the first pass warming the",
        "cache (default cache: half the logical space), trace times x10 (MSR, FIU) or x1000 (TPC-C).",
        "",
        "Host read: response time of the trace's reads (misses include the disk). Device response: every",
        "device request (host reads, dirty and clean writes, flush-reads), the paper's metric. GC time:",
        "moved pages x (tR + 2 transfers + tPROG) + their decode time + blocks x tBERS. CRC share: the",
        "read hits that found a CRC page.",
        "",
    ]
    text = ["# FlexECC evaluation (generated by scripts/eval/flexecc.sh; do not edit)", ""] + intro + [
            "## FlexECC vs all-BCH", ""] + t1 + ["", "![relative response](relative.svg)", "",
            "## Faulty conditions (R90, t = 6)", ""] + t2 + ["", "![RBER sweep](rber.svg)", ""]
    open(os.path.join(d, "README.md"), "w").write("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()

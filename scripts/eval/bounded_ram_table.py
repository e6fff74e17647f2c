#!/usr/bin/env python3
"""Table of flat vs cached map runs written by scripts/eval/bounded_ram.sh (usage: DIR)."""
import json
import os
import sys

d = sys.argv[1]
j = os.path.join(d, "json")


def load(name):
    p = os.path.join(j, name + ".json")
    if not os.path.exists(p):
        e = os.path.join(j, name + ".err")
        msg = open(e).read().strip().splitlines()[-1] if os.path.exists(e) else "no output"
        return None, msg
    return json.load(open(p)), None


names = sorted({f.rsplit("-", 1)[0] for f in os.listdir(j) if f.endswith((".json", ".err")) and not f.startswith(("ram-", "mount-"))})
print("| workload | map | WAF (all programs) | vs flat | NAND reads per host read | most programs by one host write | map pages read / written | FTL RAM (bytes) |")
print("|---|---|---|---|---|---|---|---|")
for n in names:
    flat, _ = load(n + "-flat")
    for m in ("flat", "cached"):
        r, err = load(n + "-" + m)
        if r is None:
            print(f"| {n} | {m} | stopped: {err} | | | | | |")
            continue
        rel = ""
        if m == "cached" and flat:
            rel = f"{(r['waf'] / flat['waf'] - 1) * 100:+.1f}%"
        # NAND reads a host read causes (its page, the map pages its misses read), per page read.
        rph = f"{r['nand_reads_per_host_read']:.2f}" if r["host_read_pages"] else "(no reads)"
        print(f"| {n} | {m} | {r['waf']:.3f} | {rel} | {rph} | {r['worst_host_write_programs']:,} "
              f"| {r['map_page_reads']:,} / {r['map_page_writes']:,} | {r['ftl_ram_bytes']:,} |")
print()
for m in ("flat", "cached"):
    r, err = load("ram-mt29f4g08-" + m)
    if r:
        print(f"- FTL RAM, MT29F4G08 whole chip at 7% OP, {m} map: {r['ftl_ram_bytes']:,} bytes")
for dev, label in (("", "anchor geometry"), ("mt29f4g08-", "MT29F4G08 (7% OP)")):
    for m in ("flat", "cached"):
        p = os.path.join(j, f"mount-{dev}{m}.json")
        if not os.path.exists(p):
            continue
        r = json.load(open(p))
        print(f"- Mount reads, {label} at {r['fill_permille'] / 10:.0f}% fill, {m} map: clean {r['mount_reads_clean']:,}, "
              f"after a cut mean {r['mount_reads_after_cut_mean']:,} / max {r['mount_reads_after_cut_max']:,} "
              f"({r['cuts']} cuts; checkpoint {r['checkpoint_pages']} pages; pages replayed mean "
              f"{r['mount_replayed_pages_mean']:,} / max {r['mount_replayed_pages_max']:,}; first pages of at most "
              f"{r['mount_surveyed_blocks_after_cut_max']:,} blocks read)")

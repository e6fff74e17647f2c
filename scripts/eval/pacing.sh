#!/usr/bin/env bash
# Issue #22's paced-GC table: paced vs on-demand GC, uniform random single-page writes, seed 2.
# Anchor geometry (1024 x 64 x 2 KiB, two planes) at 73 / 80 / 90% of raw capacity in use
# (--op 36.986 / 25 / 11.111, N = 2 x 65,536 x fill writes after a sequential fill and two random
# passes), and the MT29F4G08 preset at 7% OP (500,000 writes after one random pass).
# Writes docs/eval/bounded_ram/pacing.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/bounded_ram
mkdir -p "$out"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row() { # label gc json
  python3 - "$1" "$2" "$3" "${4:-}" <<'PY'
import json, sys
label, gc, path, base = sys.argv[1:5]
d = json.load(open(path))
waf = d["waf"]
rel = ""
if base:
    b = json.load(open(base))["waf"]
    rel = f" ({(waf / b - 1) * 100:+.2f}%)"
lat = d["write_latency_us"]
print(f"| {label} | {gc} | {waf:.4f}{rel} | {d['gc_page_copies']:,} | {d['worst_host_write_programs']:,} "
      f"| {d['gc_blocks_on_demand']:,} | {lat['p99']:,.0f} / {lat['max']:,.0f} | {d['erase_count_max']} |")
PY
}
{
  echo "| device, fill | GC | WAF (all programs) | GC copies | most programs by one host write | on-demand victims | write latency p99 / max (us) | erase count max |"
  echo "|---|---|---|---|---|---|---|---|"
  for cfg in "73 36.986 95683" "80 25 104858" "90 11.111 117965"; do
    set -- $cfg
    for gc in off on; do
      "$sim" run --device anchor --op "$2" --workload uniform --writes "$3" --precondition seq+random:2 \
        --seed 2 --gc-pacing "$gc" --quiet --json "$tmp/$gc.json"
    done
    row "anchor, $1%" on-demand "$tmp/off.json"
    row "anchor, $1%" paced "$tmp/on.json" "$tmp/off.json"
  done
  for gc in off on; do
    "$sim" run --device mt29f4g08 --op 7 --workload uniform --writes 500000 --precondition seq+random:1 \
      --seed 2 --gc-pacing "$gc" --quiet --json "$tmp/$gc.json"
  done
  row "MT29F4G08, 7% OP" on-demand "$tmp/off.json"
  row "MT29F4G08, 7% OP" paced "$tmp/on.json" "$tmp/off.json"
} > "$out/pacing.md"
cat "$out/pacing.md"

#!/usr/bin/env bash
# Issue #20's throughput target: device-level IOPS of 4 KiB random reads at queue depth 16
# (closed loop: a new request as soon as any in flight completes) over 1, 2, 4 and 8 LUNs,
# two LUNs per channel (1 LUN: one channel), under both schedulings of the timing model
# (--scheduling luns: a LUN runs one command at a time, transfers fill bus gaps, the MQSim-like
# model; --scheduling planes: every plane its own queue, bus in issue order, the model of the
# older figures), at the flexecc preset's 1.25 ns/byte bus and, for reference, at the
# MT29F4G08's 20 ns/byte where the bus is the bottleneck. Device: the flexecc preset's chip
# (4 KiB + 128 B pages, 64 pages per block, 2 planes per LUN, tR 25 us), 1024 blocks over the
# LUNs, filled sequentially first; 0.01% writes so the synthetic generator ends (~208k requests).
# The bound column is the analytical ceiling with LUN queues: min(LUNs / (tR + transfer),
# channels / transfer), transfer = the 4096 data bytes (the FTL also reads a few spare bytes).
# A second table sweeps the queue depth (1 to 64) for 1, 4 and 8 LUNs with LUN queues. Writes docs/eval/parallel/table.md (a few seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/parallel
mkdir -p "$out"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
iops() { # luns channels scheduling ns-per-byte [queue-depth]
  "$sim" run --device flexecc --blocks 1024 --luns "$1" --channels "$2" --scheduling "$3" \
    --xfer-ns-per-byte "$4" --workload uniform --read-ratio 0.9999 --writes 20 --queue-depth "${5:-16}" \
    --precondition seq --quiet --json "$tmp/r.json"
  python3 -c "import json; d=json.load(open('$tmp/r.json')); print(round(d['requests'] / d['simulated_seconds']))"
}
{
  echo "| bus ns/byte | LUNs | channels | bound IOPS | IOPS, LUN queues | x one LUN | IOPS, plane queues | x one LUN |"
  echo "|---|---|---|---|---|---|---|---|"
  for x in 1.25 20; do
    one_l="" one_p=""
    for cfg in "1 1" "2 1" "4 2" "8 4" "2 2" "4 4" "8 8"; do
      set -- $cfg
      l=$(iops "$1" "$2" luns "$x")
      p=$(iops "$1" "$2" planes "$x")
      [ -n "$one_l" ] || { one_l=$l; one_p=$p; }
      python3 - "$x" "$1" "$2" "$l" "$one_l" "$p" "$one_p" <<'EOF'
import sys
x, luns, ch, l, one_l, p, one_p = float(sys.argv[1]), *map(int, sys.argv[2:])
xfer_us = 4096 * x / 1000
bound = min(luns / (25 + xfer_us), ch / xfer_us) * 1e6
print(f"| {sys.argv[1]} | {luns} | {ch} | {bound:.0f} | {l} | {l / one_l:.2f} | {p} | {p / one_p:.2f} |")
EOF
    done
  done
  echo
  echo "Queue depth, LUN queues, 1.25 ns/byte:"
  echo
  echo "| queue depth | IOPS, 1 LUN | IOPS, 4 LUNs on 2 channels | ratio | IOPS, 8 LUNs on 4 channels | ratio |"
  echo "|---|---|---|---|---|---|"
  for qd in 1 2 4 8 16 32 64; do
    a=$(iops 1 1 luns 1.25 "$qd")
    b=$(iops 4 2 luns 1.25 "$qd")
    c=$(iops 8 4 luns 1.25 "$qd")
    echo "| $qd | $a | $b | $(python3 -c "print(f'{$b / $a:.2f}')") | $c | $(python3 -c "print(f'{$c / $a:.2f}')") |"
  done
} > "$out/table.md"
cat "$out/table.md"

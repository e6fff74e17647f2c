#!/usr/bin/env bash
# Issue #20's throughput check: device-level IOPS of 2 KiB random reads (1 page per request,
# 0.005% writes so the synthetic generator ends) at queue depth 16, closed loop (a new request as
# soon as any in flight completes), over 1, 2, 4 and 8 LUNs with one channel per LUN and with two
# LUNs per channel, at two bus speeds: 20 ns/byte (ONFI asynchronous mode 5, the MT29F4G08's
# bus) and 1.25 ns/byte (an 800 MT/s NV-DDR3 channel). Device: the `small` preset's chip (2 KiB +
# 64 B pages, 64 pages per block, 2 planes per LUN, tR 25 us) with 2048 blocks spread over the
# LUNs, filled sequentially first. Writes docs/eval/scaling/table.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/scaling
mkdir -p "$out"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "| bus ns/byte | LUNs | channels | IOPS | x one LUN |"
  echo "|---|---|---|---|---|"
  for x in 20 1.25; do
    one=""
    for cfg in "1 1" "2 2" "2 1" "4 4" "4 2" "8 8" "8 4"; do
      set -- $cfg
      "$sim" run --device small --blocks 2048 --luns "$1" --channels "$2" --xfer-ns-per-byte "$x" \
        --workload uniform --read-ratio 0.99995 --writes 20 --queue-depth 16 --precondition seq \
        --quiet --json "$tmp/r.json"
      iops=$(python3 -c "import json; d=json.load(open('$tmp/r.json')); print(round(d['requests'] / d['simulated_seconds']))")
      [ -n "$one" ] || one=$iops
      echo "| $x | $1 | $2 | $iops | $(python3 -c "print(f'{$iops / $one:.2f}')") |"
    done
  done
} > "$out/table.md"
cat "$out/table.md"

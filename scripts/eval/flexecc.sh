#!/usr/bin/env bash
# Issue #20's FlexECC evaluation in the paper's setup (FlexECC section 4.1): FlexECC vs an all-BCH
# device under the same write-back LRU cache manager (ftl-sim --features flex-ecc, --ecc
# flex|all-bch), on the `flexecc` preset (8 LUNs, 4 KiB pages, tR 25 us, tPROG 200 us, 1.25 ns/B,
# 15% OP, 1024 blocks) with LUN queues (--scheduling luns), copy-back GC (--copy-back checked),
# the paper's decoder (10 us for a t = 6 BCH, T_crc = 10 us / 6) and its traffic: the
# Filebench-like fileserver / webserver / varmail / oltp generators (sim_host::filebench) over a
# working set of 12 cache sizes (360 GB over 30 GB), plus R75 / R90 (uniform random 4 KiB with
# 75% / 90% reads over one cache size), trace times x ioscale 100, the cache 30/60 of the
# device (32768 pages of the 65536), six periodic flushes per measured run (every 5 minutes of
# a 30-minute run), fills from the disk when the trace says (--disk-queue off).
# Every run is made with both decode models (--decode-model lun: the decode is part of the
# read's service time on its LUN, as a simulator with one read latency per page format charges
# it; controller: the controller decodes after the transfer while the LUN serves its next
# command). Then: a load sweep (R90, OLTP), a working-set sweep (webserver), GC with the whole
# device cached and the three copy-back modes (fileserver), and an RBER sweep (fileserver,
# the paper's figure 6). Writes docs/eval/flexecc/*.json and README.md (scripts/eval/flexecc.py).
# About 3 minutes after the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/flexecc
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.svg
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dev=(--device flexecc --scheduling luns --features flex-ecc --disk-queue off --ioscale 100
  --ecc-t 6 --t-crc-ns 1666 --quiet)
paper=(--cache-pages 32768 --copy-back checked)
# Collection-time mean gaps (us) of each workload, x ioscale 100 at the device: chosen so that
# the all-BCH device's dies are about 40% busy (array time; the `util` column).
declare -A wl=(
  [fileserver]="--workload fileserver --writes 30000 --warmup 10000 --arrival-us 16"
  [webserver]="--workload webserver --writes 15000 --warmup 50000 --arrival-us 3"
  [varmail]="--workload varmail --writes 40000 --warmup 40000 --arrival-us 2.4"
  [oltp]="--workload oltp --writes 15000 --warmup 100000 --arrival-us 0.7"
  [r75]="--workload uniform --read-ratio 0.75 --working-set 1 --writes 40000 --warmup 100000 --arrival-us 0.3"
  [r90]="--workload uniform --read-ratio 0.9 --working-set 1 --writes 20000 --warmup 100000 --arrival-us 0.15"
)
pair() { # name args... : the all-BCH and the FlexECC run
  local name=$1
  shift
  for ecc in all-bch flex; do
    "$sim" run "${dev[@]}" --ecc "$ecc" "$@" --json "$out/$name.$ecc.json"
  done
}
run() { # name args... : six periodic flushes over the measured part of an all-BCH run without
  # them, then the pair
  local name=$1
  shift
  "$sim" run "${dev[@]}" --ecc all-bch --flush-interval-ms 0 "$@" --json "$tmp/span.json"
  local every
  every=$(python3 -c "import json; print(json.load(open('$tmp/span.json'))['simulated_seconds'] * 1000 / 6)")
  pair "$name" --flush-interval-ms "$every" "$@"
}
for dm in lun controller; do
  for w in fileserver varmail webserver oltp r75 r90; do
    # shellcheck disable=SC2086
    run "main-$w-$dm" "${paper[@]}" --decode-model "$dm" ${wl[$w]}
  done
done
# Load: the collection gap scaled (x2 = half the load).
for dm in lun controller; do
  for w in r90 oltp; do
    gap=$(sed -E 's/.*--arrival-us ([0-9.]+).*/\1/' <<<"${wl[$w]}")
    for x in 2 1.25 0.8 0.6 0.53; do
      args=$(sed -E "s/--arrival-us [0-9.]+/--arrival-us $(python3 -c "print($gap * $x)")/" <<<"${wl[$w]}")
      # shellcheck disable=SC2086
      run "load-$w-$dm-x$x" "${paper[@]}" --decode-model "$dm" $args
    done
  done
done
# Working set (cache sizes) of the webserver.
for ws in 4 1.5 1; do
  # shellcheck disable=SC2086
  run "ws-webserver-$ws" "${paper[@]}" --decode-model lun ${wl[webserver]} --working-set "$ws"
done
# GC with page moves: the cache fills the device; the three copy-back modes. The response
# change of one run moves by several points with the seed here (queues of milliseconds), so
# seeds 2-5 run too (gc-fileserver-MODE-sSEED) for the table's mean and range.
for cb in off checked crc-direct; do
  # shellcheck disable=SC2086
  run "gc-fileserver-$cb" --decode-model lun ${wl[fileserver]} --cache-share 1 --copy-back "$cb"
  for seed in 2 3 4 5; do
    # shellcheck disable=SC2086
    run "gc-fileserver-$cb-s$seed" --decode-model lun ${wl[fileserver]} --cache-share 1 --copy-back "$cb" --seed "$seed"
  done
done
# Faulty conditions (figure 6): fileserver under raw bit errors.
for rber in 1e-6 1e-5 1e-4 1e-3; do
  # shellcheck disable=SC2086
  run "rber-fileserver-$rber" "${paper[@]}" --decode-model lun ${wl[fileserver]} --rber "$rber"
done
python3 scripts/eval/flexecc.py "$out"

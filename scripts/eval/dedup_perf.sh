#!/usr/bin/env bash
# CAFTL performance half (issue 21): latency overhead of inline deduplication against the
# baseline with an on-device write buffer of 2-16 MiB (the paper's Figure 10), the processor-speed
# sweep 304-934 MHz at 16 MiB (Figure 11), and the speed-ups of sampling, pre-hashing and the
# dynamic switch at 2 MiB (Figures 13-16), all from ftl-sim's measured latencies.
# Writes docs/eval/dedup/perf.md (the JSON reports go to out/eval/dedup_perf/).
# Usage: bash scripts/eval/dedup_perf.sh   (about 4.5 minutes; needs cargo and python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/dedup
json=out/eval/dedup_perf   # the JSON reports (not committed; /out is ignored)
mkdir -p "$json"
cargo build --release -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim

# The paper's flash timings (caftl preset: 4 KiB pages, 2 planes per LUN) on 8 LUNs with a bus
# each (the DiskSim SSD extension's 8 parallel elements: flash is faster than one hash processor),
# 512 MiB at 25% OP, filled once with distinct data, then uniform reads and writes (half each) of
# 1-64 pages (4-256 KiB), 5% duplicate content, arriving open loop at a mean interval of ARRIVAL
# microseconds (3000: write-intensive, the processor near saturation at 304 MHz; 6000: moderate).
# The paper's SSD gives reads priority over writes (--read-priority on: a host read's flash reads
# go before queued programs and erases; one in progress is not suspended); the np_ runs repeat the
# buffer sweep and 304 MHz without it (every operation in issue order) to show its effect.
for arrival in 3000 6000; do
  w0="--device caftl --luns 8 --blocks 2048 --op 25 --precondition seq --workload uniform --writes 3000 \
     --read-ratio 0.5 --request-pages 1-64 --dup-ratio 0.05 --arrival-us $arrival"
  w="$w0 --read-priority on"
  for mib in 2 8 16; do
    $sim run $w0 --write-buffer-mib $mib --json "$json/np_a${arrival}_b${mib}_baseline.json" --quiet
    for cfg in dedup:nosample:noprehash dedup:nosample:noprehash:mhz=1000000000; do
      name=$(echo "$cfg" | tr ':=' '_-')
      $sim run $w0 --write-buffer-mib $mib --features "$cfg" --json "$json/np_a${arrival}_b${mib}_$name.json" --quiet
    done
  done
  $sim run $w0 --write-buffer-mib 16 --features "dedup:nosample:noprehash:mhz=304" \
    --json "$json/np_a${arrival}_b16_mhz304.json" --quiet
  for mib in 2 4 8 16; do
    $sim run $w --write-buffer-mib $mib --json "$json/a${arrival}_b${mib}_baseline.json" --quiet
    # The paper's Figure 10 runs without the acceleration methods.
    # mhz=1000000000: hashing costs nothing (what the deduplicating FTL costs without it).
    for cfg in dedup:nosample:noprehash dedup:noprehash dedup:nosample dedup:nosample:noprehash:switch dedup \
               dedup:nosample:noprehash:mhz=1000000000; do
      name=$(echo "$cfg" | tr ':=' '_-')
      $sim run $w --write-buffer-mib $mib --features "$cfg" --json "$json/a${arrival}_b${mib}_$name.json" --quiet
    done
  done
  # The acceleration methods where the processor is the bottleneck: 2 MiB at 304 MHz.
  for cfg in dedup:nosample:noprehash dedup:noprehash dedup:nosample dedup:nosample:noprehash:switch dedup; do
    name=$(echo "$cfg:mhz=304" | tr ':=' '_-')
    $sim run $w --write-buffer-mib 2 --features "$cfg:mhz=304" --json "$json/a${arrival}_b2_$name.json" --quiet
  done
  for mhz in 304 468 624 780; do
    $sim run $w --write-buffer-mib 16 --features "dedup:nosample:noprehash:mhz=$mhz" \
      --json "$json/a${arrival}_b16_mhz${mhz}.json" --quiet
  done
done
# Idle-time reorganisation of the fingerprint store (the paper's Figure 12 metric): the FIU mail
# sample (open loop, idle gaps), no pre-hash (every page looked up), one segment so that the
# store has several buckets per segment; a reorganisation in every gap >= 100 ms after writes.
fiu="--device caftl --trace testdata/traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse --format fiu --compact --fit"
for reorg in none sorted hotness; do
  extra=$([ "$reorg" = none ] && echo "" || echo ":reorg=$reorg")
  $sim run $fiu --features "dedup:nosample:noprehash:segments=1$extra" --json "$json/fiu_reorg_$reorg.json" --quiet
done
python3 scripts/eval/dedup_perf.py "$json" > "$out/perf.md"
echo "wrote $out/perf.md"

#!/usr/bin/env bash
# Reproduces docs/eval/dedup/: the CAFTL deduplication evaluation (issue 7).
# Runs ftl-sim on the FIU mail sample and on synthetic workloads with a duplicate ratio, with and
# without sampling, pre-hashing and the dynamic switch, then builds table.md and the SVG plots.
# Usage: bash docs/eval/dedup/run.sh   (a few minutes; needs cargo and python3)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=docs/eval/dedup
json=$out/json
mkdir -p "$json"
cargo build --release -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim

fiu="--device caftl --trace testdata/traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse --format fiu --compact --fit"
for cfg in baseline dedup:nosample dedup dedup:nosample:noprehash dedup:nosample:store=128 \
           dedup:nosample:switch:buffer=8 dedup:nosample:switch:buffer=8:ool \
           dedup:nosample:switch:buffer=8:idle=100 dedup:nosample:switch:buffer=8:idle=10:oolmem=256; do
  name=$(echo "$cfg" | tr ':=' '_-')
  feats=$([ "$cfg" = baseline ] && echo "" || echo "$cfg")
  $sim run $fiu --features "$feats" --json "$json/fiu_$name.json" --quiet
done

# Synthetic: the small device (256 blocks x 64 x 2 KiB, 10% OP), requests of 1-8 pages.
for dup in 0.1 0.3 0.5; do
  # Sequential, the logical space written about once: no content dies, offline = live oracle.
  seq="--device small --op 10 --workload sequential --writes 3000 --request-pages 1-8 --dup-ratio $dup"
  for cfg in dedup:nosample dedup dedup:nosample:noprehash; do
    name=$(echo "$cfg" | tr ':=' '_-')
    $sim run $seq --features "$cfg" --json "$json/seq_${dup}_$name.json" --quiet
  done
  # Uniform random overwrites, about 30 times the logical space: GC-heavy (WAF, erasures).
  uni="--device small --op 10 --workload uniform --writes 100000 --request-pages 1-8 --dup-ratio $dup"
  for cfg in baseline dedup:nosample dedup; do
    name=$(echo "$cfg" | tr ':=' '_-')
    feats=$([ "$cfg" = baseline ] && echo "" || echo "$cfg")
    $sim run $uni --features "$feats" --json "$json/uni_${dup}_$name.json" --quiet
  done
done
python3 "$out/report.py" "$out"

#!/usr/bin/env bash
# Issue #6's evaluation (Reusable SSD, feature `wom`): erasures and mean response time of second
# writes with and without prefetching and with both halves in one plane (the cost model of the
# paper's sequential variant), relative to the same FTL with first writes only, at 7% and
# 28% over-provisioning, on Zipf alpha 1 and 2 and the shared traces. Device: the `wom` preset
# (4 KiB + 368 B pages, 64 pages per block, 2 planes, NOP 4, any-order programming, tR 25 us,
# tPROG 200 us, tBERS 1.5 ms, 20 ns/byte bus); Zipf on 2048 blocks, traces on a device sized to
# their footprint; the device is filled sequentially first (DiskSim starts full), then the input
# is replayed until 4x the logical capacity is written. Encoding succeeds with probability 0.95
# per attempt, two attempts (the paper's code; the simulator stores no data, so it draws success
# at random as the paper's DiskSim did). Writes docs/eval/wom/.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/wom
mkdir -p "$out" "$out/fastbus" "$out/ppb16" "$out/ppb16-recycle250"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
configs=baseline,wom,wom-noprefetch,wom-sameplane
traces=testdata/traces
for op in 7 28; do
  common=(--device wom --op "$op" --precondition seq --until-written 4 --quiet --configs "$configs")
  run_trace() { # name file format
    "$sim" compare --trace "$2" --format "$3" --compact --fit "${common[@]}" \
      --json "$out/$1-op$op.json" --plots "$out/$1-op$op"
  }
  for z in 1 2; do
    "$sim" compare --workload "zipf:$z" --writes 100000000 --request-pages 1 "${common[@]}" \
      --json "$out/zipf$z-op$op.json" --plots "$out/zipf$z-op$op"
  done
  run_trace msr-hm0-sample "$traces/msr_raw_samples/msr-cambridge1-sample.csv" msr
  run_trace heimdall-1006 "$traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace" heimdall
  run_trace heimdall-1370 "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" heimdall
  run_trace tpcc "$traces/mqsim_umass_tpcc_websearch/tpcc-small.trace" disksim
  run_trace fiu-mail "$traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse" fiu
done
python3 scripts/eval/wom_table.py "$out"/*.json > "$out/table.md"
cat "$out/table.md"
# Sensitivity: the same runs at 28% with a 4x faster bus (wom-fast-bus), where second writes'
# doubled transfers matter less.
fast=(--device wom-fast-bus --op 28 --precondition seq --until-written 4 --quiet --configs "$configs")
"$sim" compare --workload zipf:2 --writes 100000000 --request-pages 1 "${fast[@]}" --json "$out/fastbus/zipf2-op28.json"
"$sim" compare --trace "$traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse" --format fiu --compact --fit \
  "${fast[@]}" --json "$out/fastbus/fiu-mail-op28.json"
"$sim" compare --trace "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" --format heimdall --compact --fit \
  "${fast[@]}" --json "$out/fastbus/heimdall-1370-op28.json"
python3 scripts/eval/wom_table.py "$out"/fastbus/*.json > "$out/fastbus/table.md"
cat "$out/fastbus/table.md"
# The traces at 7% on 16-page blocks: their footprint-sized devices with 64-page blocks have no
# over-provisioning left after the FTL's own reserves (R = 0), with 16-page blocks they have some.
small=(--device wom --pages-per-block 16 --op 7 --precondition seq --until-written 4 --quiet --configs "$configs")
run_small() { # name file format
  "$sim" compare --trace "$2" --format "$3" --compact --fit "${small[@]}" --json "$out/ppb16/$1-op7.json"
}
run_small msr-hm0-sample "$traces/msr_raw_samples/msr-cambridge1-sample.csv" msr
run_small heimdall-1006 "$traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace" heimdall
run_small heimdall-1370 "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" heimdall
run_small tpcc "$traces/mqsim_umass_tpcc_websearch/tpcc-small.trace" disksim
run_small fiu-mail "$traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse" fiu
python3 scripts/eval/wom_table.py "$out"/ppb16/*.json > "$out/ppb16/table.md"
cat "$out/ppb16/table.md"
# Sensitivity (not in the paper): the same with GC recycling only victims at most 25% valid.
run_small_limited() { # name file format
  "$sim" compare --trace "$2" --format "$3" --compact --fit "${small[@]}" --wom-recycle-max-valid 250 \
    --json "$out/ppb16-recycle250/$1-op7.json"
}
run_small_limited heimdall-1006 "$traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace" heimdall
run_small_limited heimdall-1370 "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" heimdall
run_small_limited tpcc "$traces/mqsim_umass_tpcc_websearch/tpcc-small.trace" disksim
run_small_limited fiu-mail "$traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse" fiu
python3 scripts/eval/wom_table.py "$out"/ppb16-recycle250/*.json > "$out/ppb16-recycle250/table.md"
cat "$out/ppb16-recycle250/table.md"

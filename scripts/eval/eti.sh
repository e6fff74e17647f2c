#!/usr/bin/env bash
# Issue #9's evaluation: write amplification of no separation, the request-size rule, MHF, MBF and
# ETI, in the ETI paper's setup: page-mapped greedy FTL with hot and cold write frontiers, 7% spare,
# device sized to the trace's footprint, preconditioned (sequential fill, then two uniform passes),
# then the trace replayed until twice the logical capacity is written. Writes docs/eval/eti/.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/eti
mkdir -p "$out"
cargo build --release -q -p sim-host --bin ftl-sim
sim=target/release/ftl-sim
configs=baseline,baseline@size,baseline@mhf,baseline@mbf,eti
common=(--device caftl --op 7 --precondition eti --until-written 2 --quiet --configs "$configs")
traces=testdata/traces
run_trace() { # name file format
  "$sim" compare --trace "$2" --format "$3" --compact --fit "${common[@]}" --json "$out/$1.json" --plots "$out/$1"
}
run_trace msr-hm0-sample "$traces/msr_raw_samples/msr-cambridge1-sample.csv" msr
run_trace heimdall-1006 "$traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace" heimdall
run_trace heimdall-1370 "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" heimdall
run_trace tpcc "$traces/mqsim_umass_tpcc_websearch/tpcc-small.trace" disksim
run_trace fiu-mail "$traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse" fiu
for z in 1 2; do
  "$sim" compare --workload "zipf:$z" --writes 100000000 --request-pages 1-16 --blocks 2048 "${common[@]}" \
    --json "$out/zipf$z.json" --plots "$out/zipf$z"
done
# The ETI run alone, for the plot of extents in use over time.
"$sim" run --trace "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" --format heimdall --compact --fit \
  --device caftl --op 7 --precondition eti --until-written 2 --features eti --quiet --plots "$out/heimdall-1370-eti"
python3 scripts/eval/table.py waf "$out"/*.json

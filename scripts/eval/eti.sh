#!/usr/bin/env bash
# Issues #9 and #21: write amplification of one host stream, the request-size rule, MHF, MBF, ETI
# and ETI behind the guard (ftl_policies::eti::guard; alone and with MHF as a second candidate), in the ETI paper's setup: page-mapped greedy
# FTL with hot and cold write frontiers, 7% spare, device sized to the trace's footprint,
# preconditioned (sequential fill, then two uniform passes), then the trace replayed until twice
# the logical capacity is written. Each input runs with SEEDS preconditioning seeds (default 3);
# then the paper's variants (three hash pairs for MHF and MBF, MBF at 2x and 4x), the alpha/beta
# sensitivity, a one-plane device (per-plane greedy = the paper's global greedy) and on-demand GC
# (--gc-pacing off).
# ETI_PAPER=1 adds the paper's geometry (32K x 128-page blocks, `--device eti`) on Zipf 1 (four
# processes of about 4 CPU minutes and 600 MB each).
# Writes docs/eval/eti/ (JSON per run) and docs/eval/eti/README.md (scripts/eval/eti_report.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/eti
mkdir -p "$out/runs"
cargo build --release -q -p sim-host --bin ftl-sim
sim=target/release/ftl-sim
seeds=${SEEDS:-3}
traces=testdata/traces
inputs=(
  "msr-hm0-sample|--trace $traces/msr_raw_samples/msr-cambridge1-sample.csv --format msr --compact --fit"
  "heimdall-1006|--trace $traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace --format heimdall --compact --fit"
  "heimdall-1370|--trace $traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace --format heimdall --compact --fit"
  "tpcc|--trace $traces/mqsim_umass_tpcc_websearch/tpcc-small.trace --format disksim --compact --fit"
  "fiu-mail|--trace $traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse --format fiu --compact --fit"
  "zipf1|--workload zipf:1 --writes 100000000 --request-pages 1-16 --blocks 2048"
  "zipf2|--workload zipf:2 --writes 100000000 --request-pages 1-16 --blocks 2048"
)
main=baseline,baseline@size,baseline@mhf,baseline@mbf,baseline@eti,baseline@eti:guard,baseline@mhf:guard,baseline@eti:guard:alt=mhf
variants=baseline,baseline@mhf:h1,baseline@mhf:h2,baseline@mhf:h3,baseline@mbf:h1,baseline@mbf:h2,baseline@mbf:h3,baseline@mbf:x2,baseline@mbf:x4,baseline@eti
sweep=baseline@eti,baseline@eti:alpha=90,baseline@eti:alpha=80,baseline@eti:beta=3,baseline@eti:beta=2
common=(--device caftl --op 7 --precondition eti --until-written 2 --quiet)
run() { # name args configs tag seed [extra]
  local name=$1 args=$2 configs=$3 tag=$4 seed=$5; shift 5
  # shellcheck disable=SC2086
  "$sim" compare $args "${common[@]}" --seed "$seed" --configs "$configs" "$@" --json "$out/runs/$name.$tag.s$seed.json"
}
# ONLY="heimdall-1370 zipf2" reruns those inputs only (the other rows keep their JSON in runs/);
# PARTS="main nopacing" runs only those tables' runs (main, variants, sweep, planes1, nopacing).
only=" ${ONLY:-} "
parts=" ${PARTS:-main variants sweep planes1 nopacing} "
want() { [[ "$parts" == *" $1 "* ]]; }
for item in "${inputs[@]}"; do
  name=${item%%|*}; args=${item#*|}
  if [ -n "${ONLY:-}" ] && [[ "$only" != *" $name "* ]]; then continue; fi
  for s in $(seq 1 "$seeds"); do
    if want main; then run "$name" "$args" "$main" main "$s" & fi
    if want variants; then run "$name" "$args" "$variants" variants "$s" & fi
    if want sweep; then run "$name" "$args" "$sweep" sweep "$s" & fi
    if want planes1; then
      run "$name" "$args" baseline,baseline@mhf,baseline@eti,baseline@eti:guard,baseline@eti:guard:alt=mhf planes1 "$s" --planes 1 &
    fi
    wait
    if want nopacing; then
      run "$name" "$args" baseline,baseline@mhf,baseline@eti,baseline@eti:guard,baseline@eti:guard:alt=mhf nopacing "$s" --gc-pacing off
    fi
  done
done
if [ -n "${ETI_PAPER:-}" ]; then
  # One process per configuration (each about 4 minutes of CPU and 600 MB), then one JSON array.
  paper=(baseline baseline@mhf baseline@eti baseline@eti:guard)
  parts=()
  for c in "${paper[@]}"; do
    parts+=("$out/runs/paper-zipf1.$c.tmp")
    "$sim" compare --workload zipf:1 --writes 1000000000 --request-pages 1-16 --device eti --op 7 \
      --precondition eti --until-written 2 --quiet --configs "$c" --json "$out/runs/paper-zipf1.$c.tmp" &
  done
  wait
  python3 -c 'import json,sys; json.dump([json.load(open(f))[0] for f in sys.argv[2:]], open(sys.argv[1], "w"), indent=1)' \
    "$out/runs/paper-zipf1.json" "${parts[@]}"
  rm -f "$out"/runs/paper-zipf1.*.tmp
fi
# The ETI run alone, for the plot of extents in use over time (not with ONLY or PARTS).
[ -n "${ONLY:-}${PARTS:-}" ] || "$sim" run --trace "$traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace" --format heimdall --compact --fit \
  --device caftl --op 7 --precondition eti --until-written 2 --features eti --quiet --plots "$out/heimdall-1370-eti"
python3 scripts/eval/eti_report.py "$out" > "$out/README.md"
echo "wrote $out/README.md"

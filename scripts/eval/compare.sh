#!/usr/bin/env bash
# Issue #17's evaluation: the techniques alone and stacked, side by side (`ftl-sim compare`), on
# the FIU mail sample, the TPC-C trace, Heimdall 1006 and Zipf 1: erasures, WAF and mean response
# time of each configuration, relative to the baseline, and whether the savings of a stack are
# what the techniques alone would give if they were independent (the product of their relative
# erasures). Three groups:
# - the `cdm` device (in-order programming): baseline, ETI, dedup, the NV cache (5% of the
#   logical pages, CDM), dedup + NV cache, and that stack under ETI;
# - the `wom` device (second writes need out-of-order programming): baseline, ETI, wom (the
#   paper's size rule), wom under ETI and MHF, dedup, the NV cache, wom + NV cache, wom + dedup
#   (and under ETI).
# - the `cdm` device as FlexECC's cache in front of a disk (its cache manager writes the FTL,
#   so these compare with flex-ecc alone): flex-ecc, under ETI, with dedup, with the NV cache,
#   and dedup + NV cache (+ ETI).
# Refused combinations are listed with their reason (sim::refusal, the FTL's refusals,
# ftl_core::ext::refusal): wom + flex-ecc.
# Three seeds each (preconditioning and synthetic workload); JSON in $COMPARE_RUNS (default
# target/eval-compare); writes docs/eval/compare/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/compare
runs=${COMPARE_RUNS:-target/eval-compare}
mkdir -p "$out" "$runs"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
t=testdata/traces
declare -A input=(
  [fiu-mail]="--trace $t/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse --format fiu --compact --fit --until-written 4"
  [tpcc]="--trace $t/mqsim_umass_tpcc_websearch/tpcc-small.trace --format disksim --compact --fit --until-written 4"
  [heimdall-1006]="--trace $t/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace --format heimdall --compact --fit --until-written 4"
  [zipf1]="--workload zipf:1 --read-ratio 0.5 --dup-ratio 0.3 --writes 100000 --blocks 1024"
)
common=(--precondition eti --closed-loop --quiet)
for seed in 1 2 3; do
  for name in fiu-mail tpcc heimdall-1006 zipf1; do
    # shellcheck disable=SC2086
    "$sim" compare ${input[$name]} "${common[@]}" --device cdm --seed "$seed" --nv-cache-percent 5 \
      --configs baseline,baseline@eti,dedup,cdm,dedup+cdm,dedup+cdm@eti --json "$runs/stack-$name-s$seed.json"
    # shellcheck disable=SC2086
    "$sim" compare ${input[$name]} "${common[@]}" --device wom --seed "$seed" --nv-cache-percent 5 \
      --configs baseline,baseline@eti,wom,wom@eti,wom@mhf,dedup,cdm,wom+cdm,wom+dedup,wom+dedup@eti,wom+flex-ecc \
      --json "$runs/wom-$name-s$seed.json"
    # shellcheck disable=SC2086
    "$sim" compare ${input[$name]} "${common[@]}" --device cdm --seed "$seed" --nv-cache-percent 5 \
      --configs flex-ecc,flex-ecc@eti,dedup+flex-ecc,flex-ecc+cdm,dedup+flex-ecc+cdm,dedup+flex-ecc+cdm@eti --json "$runs/flex-$name-s$seed.json"
  done
done
python3 scripts/eval/compare_table.py "$runs" "$out/README.md"

#!/usr/bin/env bash
# The test command: set up, then run every test of the workspace (unit, property, torture).
# Longer torture runs: FTL_TORTURE_CUTS=<n> raises the random power-cut count (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release
# The workspace run builds ftl-core with every feature (sim-host, and ftl-tests by default, enable
# them all). Each configuration below builds ftl-core with exactly its features and runs ftl-core's
# own tests (unit tests, tests/power_cuts.rs, tests/plane_room.rs) and the harness's suites that need no simulator: the
# model proptest, the power-cut torture and bit_errors (model and torture with BCH and raw bit
# errors); with no feature (the firmware's configuration) geometries, anchor and copy_back too. Then each
# feature alone and the two stacks of issue #17. Each configuration attaches what it enables
# (tests/src/stack.rs): `wom` second writes, `dedup` deduplication, `cdm` the NV cache,
# `flex-ecc` FlexECC, `eti` the ETI classifier with two host streams; second writes are not
# attached with flex-ecc (the core refuses the pair) nor with cdm (tests/tests/cdm.rs runs that
# pair); `wom,dedup,eti` stacks second writes with deduplication. The workspace run (every feature) attaches dedup + flex-ecc + cdm + eti.
# Case counts are reduced here (FTL_CONFIG_CASES
# proptest cases, FTL_CONFIG_CUTS random cuts per torture run, every FTL_CONFIG_STRIDE-th cut
# point of the exhaustive torture); full counts: the workspace run.
export PROPTEST_CASES="${FTL_CONFIG_CASES:-128}"
export FTL_TORTURE_CUTS="${FTL_CONFIG_CUTS:-300}"
export FTL_TORTURE_STRIDE="${FTL_CONFIG_STRIDE:-8}"
export FTL_BLIP_SEEDS="${FTL_CONFIG_BLIP_SEEDS:-40}"
suites=(--lib --test power_cuts --test plane_room --test model --test torture --test bit_errors)
cargo test --release -p ftl-core -p ftl-tests --no-default-features "${suites[@]}" --test geometries --test anchor \
  --test copy_back
for f in wom dedup flex-ecc eti cdm wom,eti wom,dedup,eti dedup,flex-ecc,cdm,eti; do
  echo "== configuration: features ${f}"
  # `wom` alone attaches same-block second writes (tests/src/stack.rs `wom_layout`), `wom,eti`
  # the default two-plane pairs.
  layout=two-planes
  [ "$f" = wom ] && layout=same-block
  FTL_WOM_LAYOUT=$layout cargo test --release -p ftl-core -p ftl-tests --no-default-features --features "$f" "${suites[@]}"
done

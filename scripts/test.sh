#!/usr/bin/env bash
# The test command: set up, then run every test of the workspace (unit, property, torture).
# Longer torture runs: FTL_TORTURE_CUTS=<n> raises the random power-cut count (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release
# The workspace run builds ftl-core with every feature (sim-host enables them all). Its own tests
# (unit tests, tests/power_cuts.rs on the emulator) also run with no feature, the firmware's
# configuration, with each feature alone, and with the two stacks issue #17 names (their
# techniques stacked in one FTL are tested by the workspace run: tests/tests/dedup.rs stacked_*,
# tests/tests/wom.rs random_cuts_with_second_writes_bch_and_eti).
cargo test --release -p ftl-core
for f in wom dedup flex-ecc eti cdm wom,eti dedup,flex-ecc,cdm,eti; do
  cargo test --release -p ftl-core --features "$f"
done

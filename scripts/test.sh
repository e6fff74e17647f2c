#!/usr/bin/env bash
# The test command: set up, then run every test of the workspace (unit, property, torture).
# Longer torture runs: FTL_TORTURE_CUTS=<n> raises the random power-cut count (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release
# The workspace run builds ftl-core with every feature (sim-host enables them all). Its own tests
# (unit tests, tests/power_cuts.rs on the emulator) also run with no feature, the firmware's
# configuration, and with each feature alone.
cargo test --release -p ftl-core
for f in wom dedup flex-ecc eti cdm; do
  cargo test --release -p ftl-core --features "$f"
done

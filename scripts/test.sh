#!/usr/bin/env bash
# The test command: set up, then run every test of the workspace (unit, property, torture).
# Longer torture runs: FTL_TORTURE_CUTS=<n> raises the random power-cut count (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release

#!/usr/bin/env bash
# The main job: set up, then run the simulator demo on the built-in NAND emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release -q -p sim-host --bin ftl-sim -- demo "$@"

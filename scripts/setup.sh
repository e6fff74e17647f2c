#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine. Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup first" >&2
  exit 1
fi
# The no_std crates are built for the Cortex-M7 of the board.
if ! rustup target list --installed | grep -qx thumbv7em-none-eabihf; then
  rustup target add thumbv7em-none-eabihf
fi
for c in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$c"; then
    rustup component add "$c"
  fi
done
# Fetch dependencies once, so later steps can say what failed.
cargo fetch --locked 2>/dev/null || cargo fetch

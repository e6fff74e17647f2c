#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine. Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup first" >&2
  exit 1
fi
# The no_std crates are built for the Cortex-M7 of the board and for Cortex-M0+ (RP2040 class).
for t in thumbv7em-none-eabihf thumbv6m-none-eabi; do
  if ! rustup target list --installed | grep -qx "$t"; then
    rustup target add "$t"
  fi
done
for c in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$c"; then
    rustup component add "$c"
  fi
done
# The NBD and filesystem tests drive the FTL with independent clients: qemu-io and qemu-img
# (qemu-utils), fsck.fat (dosfstools), mdir and mcopy (mtools). Debian packages, installed only
# when a tool is missing.
missing_pkgs=()
command -v qemu-io >/dev/null 2>&1 && command -v qemu-img >/dev/null 2>&1 || missing_pkgs+=(qemu-utils)
command -v fsck.fat >/dev/null 2>&1 || missing_pkgs+=(dosfstools)
command -v mdir >/dev/null 2>&1 && command -v mcopy >/dev/null 2>&1 || missing_pkgs+=(mtools)
# The SCSI handler's replies and sense data are decoded by sg3-utils (sg_inq, sg_vpd,
# sg_decode_sense) in ftl-block/tests/scsi.rs.
command -v sg_inq >/dev/null 2>&1 && command -v sg_vpd >/dev/null 2>&1 && command -v sg_decode_sense >/dev/null 2>&1 || missing_pkgs+=(sg3-utils)
if [ ${#missing_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y --no-install-recommends "${missing_pkgs[@]}"
fi
# The firmware's CI run boots it in QEMU's mps2-an500 (fw-stm32/run-qemu.sh): Debian's
# qemu-system-arm, installed only when missing.
if ! command -v qemu-system-arm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y --no-install-recommends qemu-system-arm
fi
# Fuzzing (scripts/fuzz.sh, fuzz/): cargo-fuzz drives libFuzzer and needs the nightly toolchain.
# Both installed only when missing.
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi
# Fetch dependencies once, so later steps can say what failed.
cargo fetch --locked 2>/dev/null || cargo fetch
(cd fuzz && (cargo fetch --locked 2>/dev/null || cargo fetch))
(cd fw-stm32 && (cargo fetch --locked 2>/dev/null || cargo fetch))

#!/usr/bin/env bash
# Reproduces the figures of docs/firmware.md: code size of the board and QEMU builds with no
# technique features and with all of them (release profile, opt-level "s"; also "z" for the
# board), split by component by size-report.py; then the QEMU run's per-page instruction counts
# with the default BCH codec, the CRC-32C-only codec and the NullCodec. Not part of CI (the
# figures of docs/firmware.md come from figures.py, which CI checks).
set -euo pipefail
cd "$(dirname "$0")"
out=target/report
mkdir -p "$out"
elf="${CARGO_TARGET_DIR:-target}/thumbv7em-none-eabihf/release/fw-stm32"

build() { # name, opt-level, cargo args...
  local name=$1 opt=$2
  shift 2
  CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt cargo build --release -q "$@"
  cp "$elf" "$out/$name.elf"
}
build board-s s
build board-all-s s --features eti,flex-ecc,cdm
build board-z z
build board-all-z z --features eti,flex-ecc,cdm
build qemu-s s --no-default-features --features qemu
build qemu-all-s s --no-default-features --features qemu,eti,flex-ecc,cdm
build qemu-crccodec-s s --no-default-features --features qemu,crc-codec
build qemu-nullcodec-s s --no-default-features --features qemu,null-codec
python3 size-report.py "$out"/*.elf | tee "$out/sizes.txt"

for f in "" crc-codec null-codec; do
  echo "== QEMU run, features: qemu${f:+,$f}"
  FW_FEATURES=$f bash run-qemu.sh >"$out/run-${f:-baseline}.txt" 2>&1
  grep -E "\] per page|RESULT" "$out/run-${f:-baseline}.txt"
done

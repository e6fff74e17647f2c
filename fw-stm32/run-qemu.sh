#!/usr/bin/env bash
# Builds the firmware for QEMU's mps2-an500 (Cortex-M7, the ONFI chip model as the NAND) and runs
# it: format, self-test, benchmark, remount and verify. Prints the firmware's output and exits
# with QEMU's exit status: 0 when the firmware reported PASS through semihosting, non-zero on any
# failure (1 from the firmware: failed check, panic, HardFault; 124 from `timeout`).
#
#   bash fw-stm32/run-qemu.sh                      # the baseline
#   FW_FEATURES=null-codec bash fw-stm32/run-qemu.sh   # extra cargo features, comma-separated
#
# QEMU runs with -icount shift=3: one instruction per 8 ns of virtual time, so the firmware's
# SysTick counts exactly 5 instructions per tick and its figures are instruction counts,
# identical from run to run.
set -euo pipefail
cd "$(dirname "$0")"

features="qemu${FW_FEATURES:+,$FW_FEATURES}"
timeout_s="${QEMU_TIMEOUT:-120}"
elf="${CARGO_TARGET_DIR:-target}/thumbv7em-none-eabihf/release/fw-stm32"
# One log (and a copy of the ELF) per feature set, for figures.py: qemu-run.log for the baseline,
# qemu-run-eti.log for FW_FEATURES=eti, ...
suffix="${FW_FEATURES:+-${FW_FEATURES//,/-}}"
log="${CARGO_TARGET_DIR:-target}/qemu-run${suffix}.log"

if ! command -v qemu-system-arm >/dev/null 2>&1; then
  echo "run-qemu: qemu-system-arm not found (scripts/setup.sh installs it)" >&2
  exit 127
fi
cargo build --release --no-default-features --features "$features"
cp "$elf" "${CARGO_TARGET_DIR:-target}/qemu${suffix}.elf"

echo "run-qemu: qemu-system-arm -machine mps2-an500 -icount shift=3, timeout ${timeout_s}s, features $features"
# No terminal for QEMU (no -nographic: it would take over the terminal), stdin closed, output
# copied to the log; `timeout` because a hung firmware never exits by itself.
set +e
timeout --kill-after=10 "$timeout_s" \
  qemu-system-arm -cpu cortex-m7 -machine mps2-an500 \
    -display none -monitor none -serial none \
    -semihosting-config enable=on,target=native \
    -icount shift=3 \
    -kernel "$elf" </dev/null 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

if [ "$status" -eq 0 ] && ! grep -q "RESULT: PASS" "$log"; then
  echo "run-qemu: QEMU exited 0 but the firmware never reported PASS" >&2
  status=1
fi
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "run-qemu: timed out after ${timeout_s}s" >&2
fi
echo "run-qemu: exit status $status"
exit "$status"

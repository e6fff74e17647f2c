#!/usr/bin/env bash
# Coverage-guided fuzzing of the targets in fuzz/ (cargo-fuzz and libFuzzer on the nightly
# toolchain; scripts/setup.sh installs both). Usage: scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]
# (default 10 s each, all targets: the smoke run of .ci/run; `scripts/fuzz.sh 600` for a longer
# run). Builds the targets, runs each for the budget from its committed seeds (fuzz/corpus/T,
# read only) plus the inputs earlier runs found (fuzz/target/corpus-run/T, kept between runs),
# and prints per target the executions and the coverage libFuzzer reached (its final
# `#N DONE cov: X ft: Y` line: N executions, X covered edges, Y features). A crash, a panic, an
# input slower than 10 s (a hang) or more than 2 GiB of memory fails the run; the input is then
# in fuzz/artifacts/T/ and the end of the log is printed.
#
# Built without a sanitizer (`-s none`): the code is safe Rust, so AddressSanitizer adds cost
# and finds nothing that the bounds and overflow checks (debug assertions are on) do not.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(mount checkpoint spare_meta onfi_param_page nbd trace)
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
mkdir -p fuzz/target/logs
if ! (cd fuzz && cargo +nightly fuzz build -s none) >fuzz/target/logs/build.log 2>&1; then
  tail -n 60 fuzz/target/logs/build.log >&2
  echo "fuzz: building the targets failed" >&2
  exit 1
fi
bin=fuzz/target/$host/release
rows=()
failed=0
passed=0
for t in "${targets[@]}"; do
  work=fuzz/target/corpus-run/$t
  mkdir -p "$work" "fuzz/artifacts/$t"
  log=fuzz/target/logs/$t.log
  status=ok
  "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="fuzz/artifacts/$t/" \
    "$work" "fuzz/corpus/$t" >"$log" 2>&1 || status=FAILED
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$done_line")
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$done_line")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$done_line")
  corp=$(sed -nE 's/.*corp: ([0-9]+)\/.*/\1/p' <<<"$done_line")
  rows+=("$(printf '%-16s %12s %8s %8s %8s %s' "$t" "${execs:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$status")")
  if [ "$status" = ok ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "fuzz: $t failed; end of $log:" >&2
    tail -n 40 "$log" >&2
    ls "fuzz/artifacts/$t/" >&2 || true
  fi
done
echo "fuzz: ${secs} s per target"
printf '%-16s %12s %8s %8s %8s %s\n' target executions cov ft corpus status
printf '%s\n' "${rows[@]}"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# Reusable SSD (feature `wom`, issues #6 and #20): second writes against the same FTL with first
# writes only, in the paper's setup as far as the simulator has it, and the paper's sweeps.
# Writes JSON reports under docs/eval/wom/ and docs/eval/wom/README.md (scripts/eval/wom_readme.py).
# About 7 minutes on the shared 2-core machine.
#
# The paper's setup (docs/eval/wom/README.md says where each choice comes from): the `wom-ssd`
# preset (4 chips of 2 planes, one data path per chip, 4 KiB + 368 B pages, 64-page blocks, tR
# 25 us, tPROG 200 us, tBERS 1.5 ms, 20 ns/byte), LUN queues (a chip runs one command at a time,
# a second write is one multi-plane program), GC on demand (DiskSim's greedy GC; GC pacing is
# off whenever second writes are on, so the baseline is run without it too), R = T - U of
# over-provisioning on top of the FTL's own reserve blocks (--op-beyond-reserve), the device
# filled first (DiskSim starts full), traces replayed at their own times (idle time between
# requests is when the prefetch reads), Zipf at exponential arrivals, until 4x the logical
# capacity is written. WOM encoding and decoding charged 12.5 us each.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/eval/wom
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
traces=testdata/traces
rm -rf "$out"/main "$out"/decomp "$out"/threshold "$out"/op "$out"/success "$out"/lifetime
mkdir -p "$out"/main "$out"/decomp "$out"/threshold "$out"/op "$out"/success "$out"/lifetime
paper=(--device wom-ssd --scheduling luns --op-beyond-reserve --precondition seq --quiet)

# input NAME: the arguments that select it.
input() {
  case $1 in
    zipf1) echo "--workload zipf:1 --writes 100000000 --request-pages 1 --arrival-us 3000" ;;
    zipf2) echo "--workload zipf:2 --writes 100000000 --request-pages 1 --arrival-us 1000" ;;
    fiu-mail) echo "--trace $traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse --format fiu --compact --fit" ;;
    msr-hm0) echo "--trace $traces/msr_raw_samples/msr-cambridge1-sample.csv --format msr --compact --fit" ;;
    heimdall-1006) echo "--trace $traces/msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace --format heimdall --compact --fit" ;;
    heimdall-1370) echo "--trace $traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace --format heimdall --compact --fit" ;;
    tpcc) echo "--trace $traces/mqsim_umass_tpcc_websearch/tpcc-small.trace --format disksim --compact --fit" ;;
  esac
}
# run DIR NAME OP CONFIGS [extra flags...]: one `compare` into DIR/NAME-opOP[-TAG].json (TAG from $tag).
run() {
  local dir=$1 name=$2 op=$3 configs=$4
  shift 4
  # shellcheck disable=SC2046
  "$sim" compare "${paper[@]}" --gc-pacing "${pacing:-off}" $(input "$name") --op "$op" --until-written 4 \
    --configs "$configs" "$@" \
    --json "$out/$dir/$name-op$op${tag:+-$tag}.json"
}

# 1. The main table: erasures and response, prefetch on / off, both halves in one plane
# (two blocks) and in one block (the paper's sequential variant).
for op in 7 28; do
  for name in zipf1 zipf2 fiu-mail msr-hm0 heimdall-1006 heimdall-1370 tpcc; do
    tag='' run main "$name" "$op" baseline,wom,wom-noprefetch,wom-sameplane,wom-sameblock
  done
done

# 2. What remains: the same runs with parts of the cost model taken away.
for op in 7 28; do
  for name in zipf2 fiu-mail msr-hm0 heimdall-1370; do
    tag=nocompute run decomp "$name" "$op" baseline,wom,wom-noprefetch --wom-encode-us 0 --wom-decode-us 0
    tag=bus1.25 run decomp "$name" "$op" baseline,wom,wom-noprefetch --xfer-ns-per-byte 1.25
    tag=bus0 run decomp "$name" "$op" baseline,wom,wom-noprefetch --xfer-ns-per-byte 0 --wom-encode-us 0 --wom-decode-us 0
    tag=bus0-nohot run decomp "$name" "$op" baseline,wom,wom-noprefetch --xfer-ns-per-byte 0 --wom-encode-us 0 \
      --wom-decode-us 0 --hot-threshold-kib 1
    tag=paced pacing=on run decomp "$name" "$op" baseline,wom,wom-noprefetch
  done
done

# 3. Figure 10: the hot/cold request-size threshold, 16-256 KiB.
for op in 7 28; do
  for name in fiu-mail msr-hm0 heimdall-1006 heimdall-1370 tpcc; do
    for kib in 16 32 64 128 256; do
      tag=t$kib run threshold "$name" "$op" baseline,wom --hot-threshold-kib "$kib"
    done
  done
done

# 4. Figure 11: over-provisioning 5-50 %.
for name in zipf2 fiu-mail msr-hm0; do
  for op in 5 7 10 15 20 28 40 50; do
    tag='' run op "$name" "$op" baseline,wom
  done
done

# 5. Figure 12: encoding success per attempt 75-100 %, (a) no retry, (b) one retry on the same
# pages (the polar code's), (c) one retry on a new pair (read first).
for op in 7 28; do
  for name in zipf2 fiu-mail; do
    for p in 750 800 850 900 950 1000; do
      tag=a$p run success "$name" "$op" baseline,wom --wom-success-permille "$p" --wom-attempts 1
      tag=b$p run success "$name" "$op" baseline,wom --wom-success-permille "$p" --wom-attempts 2
      tag=c$p run success "$name" "$op" baseline,wom --wom-success-permille "$p" --wom-attempts 1 --wom-retry-new-pair
    done
  done
done

# 6. Lifetime: blocks rated for 100 erases (so that a run ends), written until the blocks have
# spent 30 % of it on average (second writes stop per block at 30 %) and until worn out.
for name in zipf2 fiu-mail; do
  for share in 300 1000; do
    # shellcheck disable=SC2046
    "$sim" compare "${paper[@]}" --gc-pacing off $(input "$name") --op 28 --until-written 100000 --endurance 100 \
      --until-worn-permille "$share" --configs baseline,wom --json "$out/lifetime/$name-op28-worn$share.json"
  done
done

python3 scripts/eval/wom_readme.py "$out" > "$out/README.md"
echo "wrote $out/README.md"

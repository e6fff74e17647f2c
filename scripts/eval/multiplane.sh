#!/usr/bin/env bash
# Issue #20, FTL part: what multi-plane operations (ftl_core::multiplane) give in the timing
# model. Each row runs ftl-sim twice on the same workload, --multi-plane on and off, and prints
# IOPS (requests / simulated seconds), mean write and read response, and the multi-plane
# programs / reads / erases the FTL issued. Device: the flexecc preset's chip (4 KiB + 128 B
# pages, 64 pages per block, 2 planes per LUN, tR 25 us) with 1024 blocks, MQSim-like LUN queues
# (--scheduling luns), 1 LUN or 4 LUNs on 2 channels; filled sequentially first. Workloads:
# 32 KiB (8-page) uniform random writes, 4 KiB random writes (only the erases can pair), 32 KiB
# random reads. Writes docs/eval/multiplane/table.md (a minute or two).
#
# Then the stripe order and batching (issue #20, the rest): 32 KiB random writes and reads and
# 4 KiB random writes on 4 LUNs / 2 channels and 8 LUNs / 4 channels at queue depth 1 and 16,
# multi-plane off and on, each run with --stripe plane-first and channel-first, --batch off and
# on (batching takes writes only; a read run is the same with it on). Writes
# docs/eval/multiplane/stripe.md.
#
# Then the cached (flash-resident) map, the firmware board's (multi-plane programs and reads run on
# it too, and GC's deferred multi-plane erase unless a mount from the pool keeps the map's counts,
# so here, without a pool): the first table's workloads, device and
# LUN shapes, multi-plane off and on, with --map cached (16 KiB of cache) and, for reference, the
# flat map. Writes docs/eval/multiplane/cached.md. `bash scripts/eval/multiplane.sh cached` runs
# only this part.
#
# Then GC stripes (ftl_core::gc_stripe: GC's copies as multi-plane programs, the FTL lent one
# page buffer per plane): write workloads on 1 LUN and 4 LUNs / 2 channels, multi-plane on,
# --gc-stripes off and on. Writes docs/eval/multiplane/gc.md; `multiplane.sh gc` runs only it.
set -euo pipefail
part=${1:-all}
cd "$(dirname "$0")/../.."
out=docs/eval/multiplane
mkdir -p "$out"
cargo build --release -q -p sim-host --bin ftl-sim
sim=${CARGO_TARGET_DIR:-target}/release/ftl-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # multi-plane luns channels queue-depth pages read-ratio writes [more ftl-sim options]
  "$sim" run --device flexecc --blocks 1024 --luns "$2" --channels "$3" --scheduling luns \
    --workload uniform --request-pages "$5" --read-ratio "$6" --writes "$7" --queue-depth "$4" \
    --precondition seq --multi-plane "$1" "${@:8}" --quiet --json "$tmp/r.json"
  python3 - "$tmp/r.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(round(d['requests'] / d['simulated_seconds']), round(d['write_latency_us']['mean'], 1),
      round(d['read_latency_us']['mean'], 1), d['multi_plane_programs'], d['multi_plane_reads'],
      d['multi_plane_erases'], round(d['waf'], 3), d['batched_requests'])
EOF
}
if [ "$part" = all ]; then
{
  echo "| workload | LUNs / channels | QD | IOPS off | IOPS on | x | write resp. off / on (us) | read resp. off / on (us) | multi-plane programs / reads / erases (on) | WAF off / on |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for w in "32 KiB random writes|8|0|5000" "4 KiB random writes|1|0|40000" "32 KiB random reads|8|0.998|20"; do
    IFS='|' read -r name pages rr writes <<< "$w"
    for lc in "1 1" "4 2"; do
      set -- $lc
      for qd in 1 16; do
        read -r i0 w0 r0 _ _ _ a0 _ <<< "$(run off "$1" "$2" "$qd" "$pages" "$rr" "$writes")"
        read -r i1 w1 r1 mp mr me a1 _ <<< "$(run on "$1" "$2" "$qd" "$pages" "$rr" "$writes")"
        echo "| $name | $1 / $2 | $qd | $i0 | $i1 | $(python3 -c "print(f'{$i1 / $i0:.2f}')") | $w0 / $w1 | $r0 / $r1 | $mp / $mr / $me | $a0 / $a1 |"
      done
    done
  done
} > "$out/table.md"
cat "$out/table.md"

# Stripe order x batching. Per row: IOPS and mean response (writes, or reads for the read
# workload) of plane-first (PF) / channel-first (CF), unbatched and batched; multi-plane
# programs and reads; the share of write requests that went in a batch of two or more.
{
  echo "| workload | LUNs / channels | QD | multi-plane | IOPS PF / CF | CF x | IOPS batched PF / CF | resp. PF / CF (us) | resp. batched PF / CF (us) | mp programs PF / CF / batched PF / CF | mp reads PF / CF | batched share PF / CF | WAF PF / CF / batched PF / CF |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for w in "32 KiB random writes|8|0|5000" "32 KiB random reads|8|0.998|20" "4 KiB random writes|1|0|40000"; do
    IFS='|' read -r name pages rr writes <<< "$w"
    for lc in "4 2" "8 4"; do
      set -- $lc
      for qd in 1 16; do
        for mpl in off on; do
          declare -A I W P M A B
          for st in plane-first channel-first; do
            for b in off on; do
              read -r i wr rd mp mr _ a bq <<< "$(run "$mpl" "$1" "$2" "$qd" "$pages" "$rr" "$writes" --stripe "$st" --batch "$b")"
              k="$st/$b"
              I[$k]=$i; P[$k]=$mp; M[$k]=$mr; A[$k]=$a
              if [ "$rr" = 0 ]; then
                W[$k]=$wr; B[$k]=$(python3 -c "print(f'{$bq / $writes:.2f}')")
              else
                W[$k]=$rd; B[$k]=-
              fi
            done
          done
          x=$(python3 -c "print(f'{${I[channel-first/off]} / ${I[plane-first/off]}:.2f}')")
          echo "| $name | $1 / $2 | $qd | $mpl | ${I[plane-first/off]} / ${I[channel-first/off]} | $x | ${I[plane-first/on]} / ${I[channel-first/on]} | ${W[plane-first/off]} / ${W[channel-first/off]} | ${W[plane-first/on]} / ${W[channel-first/on]} | ${P[plane-first/off]} / ${P[channel-first/off]} / ${P[plane-first/on]} / ${P[channel-first/on]} | ${M[plane-first/off]} / ${M[channel-first/off]} | ${B[plane-first/on]} / ${B[channel-first/on]} | ${A[plane-first/off]} / ${A[channel-first/off]} / ${A[plane-first/on]} / ${A[channel-first/on]} |"
          unset I W P M A B
        done
      done
    done
  done
} > "$out/stripe.md"
cat "$out/stripe.md"
fi

if [ "$part" = all ] || [ "$part" = cached ]; then
# The cached map. Per row and map: IOPS off / on, mean write and read response off / on, the
# multi-plane programs / reads / erases (on), map page reads and writes off / on, WAF off / on.
runm() { # multi-plane luns channels queue-depth pages read-ratio writes map
  "$sim" run --device flexecc --blocks 1024 --luns "$2" --channels "$3" --scheduling luns \
    --workload uniform --request-pages "$5" --read-ratio "$6" --writes "$7" --queue-depth "$4" \
    --precondition seq --multi-plane "$1" --map "$8" --quiet --json "$tmp/r.json"
  python3 - "$tmp/r.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(round(d['requests'] / d['simulated_seconds']), round(d['write_latency_us']['mean'], 1),
      round(d['read_latency_us']['mean'], 1), d['multi_plane_programs'], d['multi_plane_reads'],
      d['multi_plane_erases'], d['map_page_reads'], d['map_page_writes'], round(d['waf'], 3))
EOF
}
{
  echo "| workload | LUNs / channels | QD | map | IOPS off | IOPS on | x | write resp. off / on (us) | read resp. off / on (us) | multi-plane programs / reads / erases (on) | map page reads off / on | map page writes off / on | WAF off / on |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for w in "32 KiB random writes|8|0|5000" "4 KiB random writes|1|0|40000" "32 KiB random reads|8|0.998|20"; do
    IFS='|' read -r name pages rr writes <<< "$w"
    for lc in "1 1" "4 2"; do
      set -- $lc
      for qd in 1 16; do
        for map in cached flat; do
          read -r i0 w0 r0 _ _ _ mr0 mw0 a0 <<< "$(runm off "$1" "$2" "$qd" "$pages" "$rr" "$writes" "$map")"
          read -r i1 w1 r1 mp mrd me mr1 mw1 a1 <<< "$(runm on "$1" "$2" "$qd" "$pages" "$rr" "$writes" "$map")"
          echo "| $name | $1 / $2 | $qd | $map | $i0 | $i1 | $(python3 -c "print(f'{$i1 / $i0:.2f}')") | $w0 / $w1 | $r0 / $r1 | $mp / $mrd / $me | $mr0 / $mr1 | $mw0 / $mw1 | $a0 / $a1 |"
        done
      done
    done
  done
} > "$out/cached.md"
cat "$out/cached.md"
fi

# GC stripes. Per row: IOPS off / on, mean write response off / on, the GC stripes and all
# multi-plane programs (on), GC page copies off / on, WAF off / on.
if [ "$part" = all ] || [ "$part" = gc ]; then
{
  echo "| workload | LUNs / channels | QD | IOPS off | IOPS on | x | write resp. off / on (us) | GC stripes / multi-plane programs (on) | GC copies off / on | WAF off / on |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for w in "32 KiB random writes|8|0|5000" "4 KiB random writes|1|0|40000" "32 KiB, half reads|8|0.5|20000"; do
    IFS='|' read -r name pages rr writes <<< "$w"
    for lc in "1 1" "4 2"; do
      set -- $lc
      for qd in 1 16; do
        for g in off on; do
          "$sim" run --device flexecc --blocks 1024 --luns "$1" --channels "$2" --scheduling luns \
            --workload uniform --request-pages "$pages" --read-ratio "$rr" --writes "$writes" \
            --queue-depth "$qd" --precondition seq --multi-plane on --gc-stripes "$g" --quiet \
            --json "$tmp/$g.json"
        done
        python3 - "$tmp/off.json" "$tmp/on.json" "$name" "$1 / $2" "$qd" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
iops = lambda d: d['requests'] / d['simulated_seconds']
print(f"| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {round(iops(a))} | {round(iops(b))} | "
      f"{iops(b) / iops(a):.2f} | {a['write_latency_us']['mean']:.1f} / {b['write_latency_us']['mean']:.1f} | "
      f"{b['gc_stripes']} / {b['multi_plane_programs']} | {a['gc_page_copies']} / {b['gc_page_copies']} | "
      f"{a['waf']:.3f} / {b['waf']:.3f} |")
EOF
      done
    done
  done
} > "$out/gc.md"
cat "$out/gc.md"
fi

#!/usr/bin/env python3
"""The measured figures of docs/firmware.md: regenerates them, or checks that the page still
holds what the build measures.

Usage (from anywhere):
  figures.py --build          build the board and the QEMU firmware, run QEMU, then --write
  figures.py --write          rewrite the figures block of docs/firmware.md from existing outputs
  figures.py --check          exit 1 if a figure on the page differs from the outputs by more than
                              the tolerance below (CI runs this after its board build and QEMU run)

Inputs: the board ELF (fw-stm32/target/board.elf: .ci/run and --build copy it there, since the
QEMU build overwrites the release artefact), and the QEMU runs' ELFs and logs (qemu.elf,
qemu-run.log for the baseline, qemu-eti.elf, qemu-run-eti.log, ... per technique and for
flat-map (the flat map, to compare with), written by
run-qemu.sh) (fw-stm32/target/qemu-run.log, written by run-qemu.sh).

Tolerance: 3 % for instruction counts and stack depth (a change in inlining moves them by a few
percent), 2 % for sizes. The block sits between the markers `<!-- figures:begin -->` and
`<!-- figures:end -->`; every row is `| name | value | target |`.
"""

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "docs", "firmware.md")
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "target"))
RELEASE_ELF = os.path.join(TARGET, "thumbv7em-none-eabihf", "release", "fw-stm32")
BOARD_ELF = os.path.join(TARGET, "board.elf")
LOG = os.path.join(TARGET, "qemu-run.log")
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
TOL = {"instr": 0.03, "bytes": 0.02}


def sizes(elf):
    out = subprocess.run([sys.executable, os.path.join(HERE, "size-report.py"), elf], check=True,
                         capture_output=True, text=True).stdout
    lines = out.splitlines()
    text, data, bss, _ = (int(x) for x in lines[2].split())
    ftl = int(re.search(r"FTL core \+ HAL \+ ONFI driver: (\d+) bytes", out).group(1))
    core = int(re.search(r"without the page codec: (\d+) bytes", out).group(1))
    sec = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\.\w+)\s+(\d+)\s+0x", out, re.M)}
    disk = re.search(r"^\s+(\d+)\s+disk:", out, re.M)
    # The FTL's RAM as the firmware publishes it (FW_RAM_FIGURES, see size-report.py).
    ram = {}
    if "FTL RAM (FW_RAM_FIGURES):" in out:
        part = out.split("FTL RAM (FW_RAM_FIGURES):", 1)[1]
        ram = {m.group(1): int(m.group(2)) for m in re.finditer(r"^  (\w+)\s+(\d+)$", part.split(".text by", 1)[0], re.M)}
    return dict(text=text, data=data, bss=bss, ftl=ftl, core=core, rodata=sec.get(".rodata", 0),
                disk=int(disk.group(1)) if disk else 0, axisram=sec.get(".axisram", 0), ram=ram)


#: Technique configurations run in QEMU (FW_FEATURES values); each has its log and ELF.
TECHNIQUES = ["eti", "flex-ecc", "cdm", "dedup", "wom"]
#: Measurement configurations run in QEMU besides the techniques: the flat map (no map misses),
#: to compare the default cached map with.
MEASURED = ["flat-map"]
#: The STM32H743's AXI SRAM.
AXI_SRAM = 512 * 1024


def read_log(path):
    log = open(path).read()
    if "RESULT: PASS" not in log:
        raise SystemExit(f"{path}: the QEMU run did not pass")
    return log


def ftl_driver_codec(log, phase):
    """FTL + ONFI driver + codec instructions per host page of `phase` in `log`."""
    m = re.search(r"\[%s\] per page: (\d+) instr in all = FTL (\d+) \+ ONFI driver (\d+) \+ codec (\d+)" % phase, log)
    return int(m.group(2)) + int(m.group(3)) + int(m.group(4))


def technique_rows(name):
    log = read_log(os.path.join(TARGET, f"qemu-run-{name}.log"))
    rows = []
    for phase in ("seq-write", "gc-heavy"):
        rows.append((f"{name}: {phase}: FTL + ONFI driver + codec, instr per host page", ftl_driver_codec(log, phase),
                     "instr", "-"))
    q = sizes(os.path.join(TARGET, f"qemu-{name}.elf"))
    rows.append((f"{name}: QEMU build, FTL core + HAL + ONFI driver + codec, .text bytes", q["ftl"], "bytes", "-"))
    # What shows that the technique ran.
    checks = {
        "dedup": (r"(\d+) pages deduplicated", "dedup: pages deduplicated of 64 writes of one content", "> 0"),
        "cdm": (r"(\d+) slots restored", "cdm: NV cache slots restored after the simulated reset", "> 0"),
        "wom": (r"wom: (\d+) second writes", "wom: second writes in the QEMU run", "> 0"),
    }
    if name in checks:
        pattern, label, target = checks[name]
        rows.append((label, int(re.search(pattern, log).group(1)), "instr", target))
    return rows


def measure():
    """(name, value, unit, target) rows."""
    log = read_log(LOG)
    rows = []
    m = re.search(r"\[codec\] encode: (\d+) instr", log)
    rows.append(("BCH codec: encode, instr per 2 KiB page (QEMU)", int(m.group(1)), "instr", "<= 25,000"))
    for m in re.finditer(r"\[codec\] decode (\d+) errors/codeword: (\d+) instr per page \(([^)]*)\)", log):
        k = int(m.group(1))
        target = "<= 25,000" if k == 0 else ("corrected" if k <= 4 else "never wrong data")
        rows.append((f"BCH codec: decode, {k} bit errors per codeword, instr per page", int(m.group(2)),
                     "instr", target))
    m = re.search(r"RAM: FTL (\d+) bytes", log)
    rows.append(("QEMU run: FTL RAM (Ftl::ram_bytes; cached map, 1 KiB cache for 2,048 logical pages), bytes",
                 int(m.group(1)), "bytes", "-"))
    for phase in ("seq-write", "rand-write", "gc-heavy"):
        m = re.search(r"\[%s\] per page excluding codec and NAND bus: (\d+) instr" % phase, log)
        rows.append((f"{phase}: FTL + ONFI driver, instr per host page (cached map with misses, bit errors on)",
                     int(m.group(1)), "instr", "< 5,000"))
        m = re.search(r"\[%s\] map: \d+ map-page reads, \d+ map-page writes \((\d+)\.(\d+) and (\d+)\.(\d+) per" % phase,
                      log)
        rows.append((f"{phase}: map-page reads per 1,000 host pages (cached map, 1 KiB cache)",
                     int(m.group(1)) * 1000 + int(m.group(2)), "instr", "-"))
        rows.append((f"{phase}: map-page writes per 1,000 host pages (cached map, 1 KiB cache)",
                     int(m.group(3)) * 1000 + int(m.group(4)), "instr", "-"))
    flat = read_log(os.path.join(TARGET, "qemu-run-flat-map.log"))
    for phase in ("seq-write", "rand-write", "gc-heavy"):
        m = re.search(r"\[%s\] per page excluding codec and NAND bus: (\d+) instr" % phase, flat)
        rows.append((f"flat-map (no map misses): {phase}: FTL + ONFI driver, instr per host page (bit errors on)",
                     int(m.group(1)), "instr", "< 5,000"))
    for label, text in (("cached map", log), ("flat-map", flat)):
        m = re.search(r"at most (\d+) NAND programs for one host page write", text)
        rows.append((f"{label}: most NAND programs caused by one host page write (QEMU run, 50% fill)",
                     int(m.group(1)), "instr", "-"))
    # With the codec: a map-page read is decoded like a data page (BCH with the injected errors).
    for phase in ("rand-write", "gc-heavy"):
        for label, text in (("cached map", log), ("flat-map", flat)):
            rows.append((f"{label}: {phase}: FTL + ONFI driver + codec, instr per host page",
                         ftl_driver_codec(text, phase), "instr", "-"))
    m = re.search(r"stack: (\d+) bytes used at most", log)
    rows.append(("QEMU run: stack, bytes at most", int(m.group(1)), "instr", "-"))
    m = re.search(r"\[fat\] created .* NAND (\d+) programs, (\d+) reads", log)
    rows.append(("FAT round trip (QEMU, 512-byte clusters): NAND programs to create the two files (20,679 bytes)",
                 int(m.group(1)), "instr", "-"))
    b = sizes(BOARD_ELF)
    r = b["ram"]
    rows.append(("board: logical pages mapped (2 KiB each; the chip has 262,144 raw pages)", r["logical_pages"],
                 "bytes", "whole chip at 7% OP: 244,994"))
    rows.append(("board: FTL RAM (RamLayout + CachedMapLayout + Ftl struct; cached map, 16 KiB cache), bytes",
                 r["ftl_bytes"], "bytes", "<= 98,304"))
    rows.append(("board: map cache (read lines + dirty-entry buffer), bytes", r["map_cache"], "bytes", "-"))
    rows.append(("board: map directory + map I/O buffer, bytes", r["map_directory"] + r["map_io"], "bytes", "-"))
    rows.append(("board: block table + list heads + page buffer + Ftl struct, bytes",
                 r["block_table"] + r["list_heads"] + r["page_buffer"] + r["ftl_struct"], "bytes", "-"))
    rows.append(("board: AXI SRAM left free (of 524,288), bytes", AXI_SRAM - b["axisram"], "bytes", "-"))
    rows.append(("board: text (flash: .vector_table + .text + .rodata), bytes", b["text"], "bytes", "-"))
    rows.append(("board: .rodata (BCH and CRC tables included), bytes", b["rodata"], "bytes", "-"))
    rows.append(("board: RAM (.data + .bss), bytes", b["data"] + b["bss"], "bytes", "-"))
    rows.append(("board: FTL core + HAL + ONFI driver (no codec), .text bytes", b["core"], "bytes", "< 32,768"))
    rows.append(("board: FTL core + HAL + ONFI driver + page codec, .text bytes", b["ftl"], "bytes", "-"))
    rows.append(("board: disk (ftl-block, embedded-sdmmc, usbd-storage, usb-device, synopsys-usb-otg), .text bytes",
                 b["disk"], "bytes", "-"))
    q = sizes(os.path.join(TARGET, "qemu.elf"))
    rows.append(("baseline: QEMU build, FTL core + HAL + ONFI driver + codec, .text bytes", q["ftl"], "bytes", "-"))
    for name in TECHNIQUES:
        rows += technique_rows(name)
    return rows


def fmt(v):
    return f"{v:,}"


def block(rows):
    out = [BEGIN, "| figure | measured | target |", "|---|---|---|"]
    out += [f"| {n} | {fmt(v)} | {t} |" for n, v, _, t in rows]
    out.append(END)
    return "\n".join(out)


def page_rows(doc):
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC}: no figures block")
    body = doc[doc.index(BEGIN):doc.index(END)]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[\d,]+", cells[1]):
            rows[cells[0]] = int(cells[1].replace(",", ""))
    return rows


def main():
    args = sys.argv[1:]
    if args == ["--build"]:
        env = dict(os.environ)
        subprocess.run(["cargo", "build", "--release"], cwd=HERE, check=True)
        shutil.copy(RELEASE_ELF, BOARD_ELF)
        subprocess.run(["bash", os.path.join(HERE, "run-qemu.sh")], cwd=HERE, check=True, env=env,
                       stdout=subprocess.DEVNULL)
        for name in TECHNIQUES + MEASURED:
            subprocess.run(["bash", os.path.join(HERE, "run-qemu.sh")], cwd=HERE, check=True,
                           env=dict(env, FW_FEATURES=name), stdout=subprocess.DEVNULL)
        args = ["--write"]
    rows = measure()
    doc = open(DOC).read()
    if args == ["--write"]:
        new = doc[:doc.index(BEGIN)] + block(rows) + doc[doc.index(END) + len(END):]
        open(DOC, "w").write(new)
        print(block(rows))
        return
    if args != ["--check"]:
        raise SystemExit(__doc__)
    page = page_rows(doc)
    bad = 0
    for name, v, unit, _ in rows:
        if name not in page:
            print(f"figures: missing on the page: {name} (measured {fmt(v)})")
            bad += 1
            continue
        p = page[name]
        if abs(p - v) > TOL[unit] * max(abs(v), 1):
            print(f"figures: {name}: page says {fmt(p)}, build measures {fmt(v)} (tolerance {TOL[unit]:.0%})")
            bad += 1
    for name in set(page) - {r[0] for r in rows}:
        print(f"figures: on the page but no longer measured: {name}")
        bad += 1
    if bad:
        print("figures: docs/firmware.md is stale; regenerate with `python3 fw-stm32/figures.py --build`")
        sys.exit(1)
    print(f"figures: {len(rows)} figures of docs/firmware.md match the build")


if __name__ == "__main__":
    main()

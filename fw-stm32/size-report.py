#!/usr/bin/env python3
"""Code size of a firmware ELF, by section and by component (no tools beyond Python 3).

Usage: size-report.py ELF [ELF...]

Prints, for each ELF:
- the Berkeley-style text/data/bss totals (text = .vector_table + .text + .rodata, as
  arm-none-eabi-size counts them; data = .data; bss = .bss + .uninit + the NOLOAD sections of
  the memory layouts, i.e. the FTL's tables and the NAND model's array);
- every allocated section;
- the FTL's RAM by part as the firmware publishes it (the `#[no_mangle]` static
  FW_RAM_FIGURES, app::RamFigures: u32 words in the order of RAM_FIGURES below), when present;
- .text split by component, from the sizes of the function symbols and their (demangled) Rust
  paths. The firmware calls the FTL and the ONFI driver only through the non-inlined functions
  of fw_stm32::ftl_api, the FTL calls the driver through fw_stm32::meter::TimedNand, and the bus
  and codec wrappers of fw_stm32::meter are not inlined either,
  so code the compiler inlined across crates stays on the right side of the split. Still an
  attribution by symbol: a small helper of one crate inlined into another's function counts for
  the latter.
"""

import re
import struct
import sys

SHT_SYMTAB = 2
SHF_ALLOC = 0x2
STT_FUNC = 2

# Component of a demangled path, first match wins.
RULES = [
    (r"^fw_stm32::ftl_api::", "ftl_api"),
    (r"^fw_stm32::meter::TimedNand", "ftl_api"),
    (r"^fw_stm32::meter::TimedCodec", "codec"),
    (r"^fw_stm32::meter::TimedBus", "bus"),
    (r"^fw_stm32::board::fmc::", "bus"),
    (r"^nand_hal::onfi::model", "bus"),
    (r"^nand_hal::onfi::", "onfi"),
    (r"^nand_hal::", "hal"),
    (r"^ftl_policies::flex_ecc::", "codec"),
    (r"^(ftl_core|ftl_policies)::", "ftl"),
    (r"^(crc|crc_catalog)::", "ftl"),
    (r"^(ftl_block|embedded_sdmmc|usbd_storage|usb_device|synopsys_usb_otg)::", "disk"),
    (r"^fw_stm32::", "app"),
    (r"^(stm32h7xx_hal|stm32h7|cortex_m|cortex_m_rt|cortex_m_semihosting|defmt|defmt_rtt|panic_probe|"
     r"critical_section|embedded_hal|fugit|nb|void|bare_metal)::", "platform"),
    (r"^(core|compiler_builtins|alloc)::", "core"),
]

LABELS = {
    "ftl": "FTL core (ftl-core, ftl-policies, crc), out of line",
    "hal": "HAL (nand-hal: geometry, errors, NandFlash), out of line",
    "onfi": "ONFI driver (nand-hal::onfi), out of line",
    "ftl_api": "FTL and driver code inlined into fw_stm32::ftl_api and meter::TimedNand",
    "codec": "page codec (BCH + CRC-32C: ftl_policies::flex_ecc, and what is inlined behind meter::TimedCodec)",
    "bus": "bus: ONFI chip model (QEMU) or FMC accesses (board)",
    "disk": "disk: sector adapter, SCSI, FAT (ftl-block, embedded-sdmmc), USB (usbd-storage, usb-device, synopsys-usb-otg)",
    "app": "application (self-test, benchmark, FAT round trip, USB loop, metering, start-up)",
    "platform": "platform crates (HAL, PAC, cortex-m, defmt, RTT, semihosting)",
    "core": "core and compiler-builtins",
    "other": "other symbols (start-up, memcpy, division, ...)",
}
FTL_TOTAL = ["ftl", "hal", "onfi", "ftl_api", "codec"]

#: The fields of app::RamFigures, in order.
RAM_FIGURES = ["logical_pages", "raw_pages", "ftl_bytes", "map_cache", "map_directory", "map_io", "flat_map",
               "valid_bitmap", "block_table", "list_heads", "page_buffer", "ftl_struct"]
ORDER = FTL_TOTAL + ["bus", "disk", "app", "platform", "core", "other"]

ESCAPES = [("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$RF$", "&"), ("$BP$", "*"), ("$C$", ","),
           ("$u7b$", "{"), ("$u7d$", "}"), ("$u5b$", "["), ("$u5d$", "]"), ("$SP$", "@"), ("$u27$", "'"),
           ("$u3b$", ";"), ("$u22$", '"'), ("$u2b$", "+"), ("..", "::")]


def demangle_legacy(name):
    """_ZN<len><ident>...E -> a::b::c (hash dropped)."""
    i, parts = 3, []
    while i < len(name) and name[i] != "E":
        m = re.match(r"\d+", name[i:])
        if not m:
            return name
        n = int(m.group())
        i += len(m.group())
        parts.append(name[i:i + n])
        i += n
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    out = "::".join(parts)
    for a, b in ESCAPES:
        out = out.replace(a, b)
    if out.startswith("_"):
        out = out[1:]
    return out


def crate_of_v0(name):
    """_R... (v0 mangling): the first crate root's name, as `crate::`."""
    m = re.search(r"C(?:s[0-9A-Za-z]*_)?(\d+)", name)
    if not m:
        return name
    n = int(m.group(1))
    start = m.end()
    return name[start:start + n] + "::"


def path_of(name):
    if name.startswith("_ZN"):
        d = demangle_legacy(name)
    elif name.startswith("_R"):
        d = crate_of_v0(name)
    else:
        return name
    # `<a::B<T> as c::D>::f`: the implementing type's path decides.
    d = d.lstrip("<&* ")
    if d.startswith("mut "):
        d = d[4:]
    return d


def component(name):
    p = path_of(name)
    for rx, comp in RULES:
        if re.match(rx, p):
            return comp
    return "other"


def read_elf(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise SystemExit(f"{path}: not a little-endian ELF32 file")
    e_shoff, = struct.unpack_from("<I", data, 0x20)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    secs = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, typ, flags, addr, offset, size, link, info, align, entsize = struct.unpack_from("<10I", data, off)
        secs.append(dict(name_off=name, type=typ, flags=flags, addr=addr, offset=offset, size=size, link=link,
                         entsize=entsize))
    shstr = secs[e_shstrndx]

    def cstr(tab, off):
        start = tab["offset"] + off
        return data[start:data.index(b"\0", start)].decode("utf-8", "replace")

    for s in secs:
        s["name"] = cstr(shstr, s["name_off"])
    syms = []
    for s in secs:
        if s["type"] != SHT_SYMTAB:
            continue
        strtab = secs[s["link"]]
        for j in range(s["size"] // 16):
            st_name, value, size, info, other, shndx = struct.unpack_from("<IIIBBH", data, s["offset"] + j * 16)
            syms.append(dict(name=cstr(strtab, st_name), value=value & ~1, size=size, type=info & 0xF,
                             shndx=shndx))
    return secs, syms, data


def ram_figures(path):
    """The FW_RAM_FIGURES static of the ELF as {field: value}, or None if it has none."""
    secs, syms, data = read_elf(path)
    sym = next((s for s in syms if s["name"] == "FW_RAM_FIGURES"), None)
    if sym is None or sym["size"] != 4 * len(RAM_FIGURES):
        return None
    sec = secs[sym["shndx"]]
    off = sec["offset"] + sym["value"] - sec["addr"]
    return dict(zip(RAM_FIGURES, struct.unpack_from(f"<{len(RAM_FIGURES)}I", data, off)))


def report(path):
    secs, syms, _ = read_elf(path)
    alloc = [s for s in secs if s["flags"] & SHF_ALLOC and s["size"] > 0]
    by_name = {s["name"]: s for s in alloc}
    text = sum(by_name[n]["size"] for n in (".vector_table", ".text", ".rodata") if n in by_name)
    data = by_name.get(".data", {"size": 0})["size"]
    bss = sum(s["size"] for s in alloc if s["name"] not in (".vector_table", ".text", ".rodata", ".data"))
    print(f"== {path}")
    print(f"   text    data     bss     dec")
    print(f"{text:7d} {data:7d} {bss:7d} {text + data + bss:7d}")
    print("sections:")
    for s in alloc:
        print(f"  {s['name']:<14} {s['size']:9d}  0x{s['addr']:08x}")
    ram = ram_figures(path)
    if ram:
        print("FTL RAM (FW_RAM_FIGURES):")
        for k, v in ram.items():
            print(f"  {k:<14} {v:9d}")
    text_idx = next(i for i, s in enumerate(secs) if s["name"] == ".text")
    seen = set()
    totals = {c: 0 for c in ORDER}
    biggest = {c: [] for c in ORDER}
    for sym in syms:
        if sym["type"] != STT_FUNC or sym["shndx"] != text_idx or sym["size"] == 0:
            continue
        key = (sym["value"], sym["size"])
        if key in seen:
            continue
        seen.add(key)
        c = component(sym["name"])
        totals[c] += sym["size"]
        biggest[c].append((sym["size"], path_of(sym["name"])))
    attributed = sum(totals.values())
    text_size = by_name[".text"]["size"]
    print(".text by component:")
    for c in ORDER:
        print(f"  {totals[c]:7d}  {LABELS[c]}")
    print(f"  {text_size - attributed:7d}  padding and code outside function symbols")
    ftl = sum(totals[c] for c in FTL_TOTAL)
    print(f"FTL core + HAL + ONFI driver: {ftl} bytes of .text ({ftl / 1024:.1f} KiB), page codec included")
    core_only = ftl - totals["codec"]
    print(f"FTL core + HAL + ONFI driver without the page codec: {core_only} bytes of .text "
          f"({core_only / 1024:.1f} KiB; target < 32 KiB)")
    print(f"everything else in .text:     {text_size - ftl} bytes")
    if "-v" in sys.argv:
        for c in ORDER:
            for size, name in sorted(biggest[c], reverse=True)[:8]:
                print(f"    {c:<8} {size:6d} {name[:110]}")


def main():
    elves = [a for a in sys.argv[1:] if a != "-v"]
    if not elves:
        raise SystemExit(__doc__)
    for path in elves:
        report(path)


if __name__ == "__main__":
    main()

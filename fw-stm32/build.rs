//! Picks the memory layout of the platform (`board` or `qemu` feature) and passes the linker
//! scripts: cortex-m-rt's `link.x` (which includes `memory.x`) and, for the board, defmt's.
//! Sets `cfg(flat_map)` when the build keeps the flat map (see src/bundle.rs): with `cdm`,
//! `dedup` or `wom` (ftl-core refuses them on the cached map; `eti` and `flex-ecc` run on it) or
//! the `flat-map` measurement build.

use std::{env, fs, path::PathBuf};

fn main() {
    let board = env::var_os("CARGO_FEATURE_BOARD").is_some();
    let qemu = env::var_os("CARGO_FEATURE_QEMU").is_some();
    // Two files with neither named memory.x, so that the linker (which looks in its working
    // directory first) can only find the copy made here.
    let layout = match (board, qemu) {
        (true, false) => "memory/stm32h743.x",
        (false, true) => "memory/mps2-an500.x",
        // main.rs reports the feature error; link with something so that it is the only error.
        _ => "memory/stm32h743.x",
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::copy(layout, out.join("memory.x")).expect("copy the memory layout");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-check-cfg=cfg(flat_map)");
    let flat = ["CDM", "DEDUP", "WOM", "FLAT_MAP"]
        .iter()
        .any(|f| env::var_os(format!("CARGO_FEATURE_{f}")).is_some());
    if flat {
        println!("cargo:rustc-cfg=flat_map");
    }
    println!("cargo:rerun-if-changed={layout}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg=-Tlink.x");
    if board {
        println!("cargo:rustc-link-arg=-Tdefmt.x");
    }
}

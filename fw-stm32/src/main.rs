//! # fw-stm32: the FTL on raw ONFI NAND, on the STM32H743 and under QEMU
//!
//! One application ([`app`]) over two platforms, chosen by cargo feature:
//! - `board` (default): the ALIENTEK Apollo STM32H743 with an MT29F4G08ABADA on FMC bank 3
//!   ([`board`]); logs with defmt over RTT; `cargo run --release` flashes it with probe-rs.
//! - `qemu`: QEMU's `mps2-an500` (Cortex-M7) with the ONFI chip model of nand-hal in RAM as the
//!   NAND (`qemu`); logs and exits through semihosting (exit status 0 on success, 1 on any failure,
//!   panic and HardFault included). `run-qemu.sh` builds and runs it.
//!
//! See docs/firmware.md at the repository root.
#![no_std]
#![no_main]

#[cfg(all(feature = "board", feature = "qemu"))]
compile_error!(
    "enable exactly one platform feature: `board` (default) or `qemu` (with --no-default-features)"
);
#[cfg(not(any(feature = "board", feature = "qemu")))]
compile_error!("enable one platform feature: `board` (default) or `qemu` (with --no-default-features)");

#[macro_use]
mod log;
#[macro_use]
mod mem;

mod app;
#[macro_use]
mod bundle;
mod codec_bench;
mod fat;
mod ftl_api;
mod meter;
mod stack;

#[cfg(feature = "board")]
mod board;
#[cfg(feature = "board")]
use board as platform;

#[cfg(all(feature = "qemu", not(feature = "board")))]
mod qemu;
#[cfg(all(feature = "qemu", not(feature = "board")))]
use qemu as platform;

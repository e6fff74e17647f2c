#![no_std]
pub mod policy {}

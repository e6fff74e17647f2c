//! Criterion benchmarks of the FTL hot paths live in `benches/`.

//! Integration, property and torture tests live in `tests/`.

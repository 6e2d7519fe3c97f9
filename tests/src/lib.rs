//! Integration tests across crates and processes live in `tests/`; this library holds what they share.

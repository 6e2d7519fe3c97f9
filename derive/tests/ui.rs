//! Compile-fail tests: each misuse of the derives is one spanned error (`tests/ui/*.stderr`), and
//! a `no_std` crate can derive a service (`tests/pass`). `TRYBUILD=overwrite` rewrites the
//! `.stderr` files after a deliberate change.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}

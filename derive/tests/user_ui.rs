//! Services written as a user writes them, at the edges of what the derive takes, compiled as
//! separate crates (trybuild): what it must refuse is one clear error (`tests/user_ui/*.rs`, each
//! with its `.stderr`; `TRYBUILD=overwrite` rewrites them after a deliberate change), and what it
//! must take compiles and runs (`tests/user_pass/*.rs`).

// Tries: a service enum with a type parameter, and one with a lifetime and a borrowed argument.
// Must hold: each is refused with an error at the enum's generics that says a service cannot be
// generic (and, for the borrowed argument, that references cannot cross), and nothing more.
#[test]
fn generic_services_are_refused_clearly() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/user_ui/*.rs");
}

// Tries: calls named as methods of the std prelude's traits (`Clone`, `AsRef`, `ToOwned`,
// `Drop`), which `Arc` implements, with blocking and async handlers, called in-process. Must
// hold: the service compiles (a service gets its async server trait whether or not it is used)
// and each call returns what its handler returned.
//
// (A defect, fixed: the async server called the handler as a method of the `Arc` that holds it,
// and the async client called the blocking client's method by method-call syntax, so `Arc`'s
// `clone` or `Into::into` was found first; both now name the call through its trait or type.)
#[test]
fn calls_named_as_prelude_methods_compile() {
    let t = trybuild::TestCases::new();
    t.pass("tests/user_pass/prelude_names.rs");
}

// Tries: a call marked `#[deprecated]` in a crate that denies warnings. Must hold: defining it
// compiles without a warning (only the handler, which names it, allows `deprecated`).
//
// (A defect, fixed: the generated `opcode()`, `__rpc_used` and `__rpc_read` name every variant
// and warned "use of deprecated variant" at the definition, which no `#[allow]` on the enum
// silences; they now allow it themselves.)
#[test]
fn a_deprecated_call_compiles_without_warnings() {
    let t = trybuild::TestCases::new();
    t.pass("tests/user_pass/deprecated_call.rs");
}

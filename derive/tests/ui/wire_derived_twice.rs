// A derive that `#[wire]` adds, also written: an error at the derive written; no conflicting
// impls.
use ferry_rpc::{wire, Schema};

#[wire]
#[derive(Clone, Schema, ferry_rpc::zerocopy::IntoBytes)]
pub struct Key {
    id: u32,
}

fn main() {}

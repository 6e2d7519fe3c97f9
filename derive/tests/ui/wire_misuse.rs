// `#[wire]` on a union, on a function, and with an unknown setting.
#[ferry_rpc::wire]
pub union Either {
    a: u32,
    b: f32,
}

#[ferry_rpc::wire]
fn not_a_type() {}

#[ferry_rpc::wire(repr = "C")]
pub struct Key {
    id: u32,
}

fn main() {}

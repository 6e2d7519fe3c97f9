// Boxes, pointers and a `String` inside an array in a `#[wire]` type: an error at each.
#[ferry_rpc::wire]
pub struct Links {
    next: Box<u64>,
    raw: *const u8,
    names: [String; 2],
}

fn main() {}

// A `Vec<u8>` field in a `#[wire]` type: one error at the field's type, saying to send `Bytes`.
#[ferry_rpc::wire]
pub enum Blob {
    Empty,
    Full { data: Vec<u8> },
}

fn main() {}

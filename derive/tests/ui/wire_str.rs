// A `&str` field in a `#[wire]` type: references cannot cross; text is `Text`.
#[ferry_rpc::wire]
pub struct Label {
    id: u32,
    text: &'static str,
}

fn main() {}

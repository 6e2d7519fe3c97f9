// A `String` field in a `#[wire]` type: one error at the field's type, saying to send `Text`;
// the service using the type reports nothing more.
use ferry_rpc::{wire, RpcOpcodes};

#[wire]
pub struct Person {
    age: u32,
    name: String,
}

#[derive(RpcOpcodes)]
enum People {
    #[rpc(response = u64)]
    Add { person: Person },
}

fn main() {
    let _ = Person {
        age: 1,
        name: String::from("x"),
    };
}

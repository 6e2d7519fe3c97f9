use ferry_derive::Schema;

// A union's bytes have no one structure: refused, and the stand-in impl keeps uses quiet.
#[derive(Schema)]
#[repr(C)]
union Either {
    word: u64,
    bytes: [u8; 8],
}

fn main() {
    let _ = <Either as ferry_rpc::service::Schema>::SCHEMA;
}

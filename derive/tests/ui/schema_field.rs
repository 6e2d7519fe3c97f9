use ferry_derive::Schema;

#[repr(C)]
struct Inner {
    id: u32,
}

// A field's type without a `Schema`: the error points at the field's type.
#[derive(Schema)]
#[repr(C)]
struct Outer {
    inner: Inner,
    count: u32,
}

fn main() {}

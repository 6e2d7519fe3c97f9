use ferry_derive::Schema;

#[derive(Schema)]
#[schema(rename = "Other")]
#[repr(C)]
struct Point {
    x: i32,
    y: i32,
}

fn main() {}

// Input of the expansion snapshot test (`src/expand.rs`): `#[derive(Schema)]` on each kind of
// type it takes.
#[derive(Schema)]
#[repr(C)]
pub struct Span {
    start: u64,
    len: u32,
}

#[derive(Schema)]
#[repr(C)]
pub struct Pair<T>(T, T);

#[derive(Schema)]
#[repr(C)]
pub struct Marker;

#[derive(Schema)]
#[repr(u8)]
pub enum Mode {
    Add = 1,
    Sub,
}

#[derive(Schema)]
#[repr(C, u16)]
pub enum Shape {
    Dot,
    Line { from: Span, to: Span } = 7,
    Box(Pair<u32>),
}

// Input of the expansion snapshot test (`src/expand.rs`): `#[wire]` on each kind of type it
// takes, with and without a `repr` of its own.
#[wire]
pub struct Span {
    start: u64,
    len: u64,
}

#[wire]
#[derive(Clone, Copy)]
pub struct Pair<T>(T, T);

#[wire]
#[repr(transparent)]
pub struct Id(u32);

#[wire]
pub enum Mode {
    Add = 1,
    Sub,
}

#[wire]
#[repr(u8)]
pub enum Refusal {
    Full = 1,
}

#[wire]
pub struct Named {
    id: u32,
    name: String,
}

//! The structure of a type that crosses: [`Schema`], a hash of everything a value's bytes mean,
//! which the service [`Fingerprint`](super::Fingerprint) takes in for every fixed argument, reply
//! and error.
//!
//! Two sides that agree on a type's name, size and alignment can still disagree on what its bytes
//! mean: a newer definition that swaps two `u64` fields reads the older side's first field as its
//! second, and every byte pattern is a valid `u64`, so nothing fails to decode and the garbage
//! comes back as a value. The fingerprint therefore hashes each fixed type's structure, down to
//! the primitives:
//!
//! - a primitive (`u8` to `u128`, `i8` to `i128`, `usize`, `isize`, `f32`, `f64`, `bool`,
//!   `char`, `()`): its name, size and alignment;
//! - an array `[T; N]`: `N` and `T`'s schema;
//! - a struct: its name, size and alignment, and per field (in declaration order) its name
//!   (`0`, `1`, ... in a tuple struct), its offset and its type's schema;
//! - an enum: its name, its `#[repr(..)]`, size and alignment, and per variant its name, its
//!   discriminant's value, and its fields by name and schema in order (with the `repr` these fix
//!   every field's offset, as the language's layout rules for `#[repr(C)]` and `#[repr(u8)]`
//!   enums lay them out).
//!
//! `#[derive(Schema)]` (`ferry_rpc::Schema`, with the `derive` feature; re-exported by
//! `ferry-shm`, `ferry-device` and `ferry-gpu`) implements it for a struct or enum; this module
//! implements it for the primitives, arrays and `PhantomData`. Everything is computed in `const`,
//! so the fingerprint stays a constant and the trait is as usable in `no_std` and GPU code as the
//! rest of the crate.

use core::marker::PhantomData;

use super::{fnv1a_64, FNV64_OFFSET};

/// A type whose structure is part of a service's fingerprint: every fixed argument, reply and
/// error type of a `#[derive(RpcOpcodes)]` service implements it. Derive it with
/// `#[derive(Schema)]`.
///
/// [`SCHEMA`](Self::SCHEMA) hashes the type's name, size, alignment and, recursively, its fields
/// (their names, offsets and types) or its variants (their names, discriminants and fields): see
/// [`SchemaHash`], with which a type written by hand builds it.
///
/// Not `unsafe`: a wrong hash cannot make a value out of bytes that are not one (every value is
/// read back with zerocopy's `TryFromBytes`); it only lets two sides that disagree on what a
/// valid value means connect.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no `Schema`, so a service's fingerprint cannot cover its structure",
    label = "crosses in a service call: needs `#[wire]` or `#[derive(Schema)]`",
    note = "put `#[wire]` on `{Self}` (`ferry_rpc::wire`, re-exported by `ferry_shm`, \
            `ferry_device` and `ferry_gpu`): it brings zerocopy's derives, a `repr` and `Schema`; \
            or add `#[derive(Schema)]` beside zerocopy derives of its own"
)]
pub trait Schema {
    /// The hash of the type's structure (see [`SchemaHash`]).
    const SCHEMA: u64;
}

/// A type's [`Schema`] hash, built in `const` context: FNV-1a 64 over what kind of type it is,
/// its name, size and alignment, then its fields or variants in declaration order. What
/// `#[derive(Schema)]` generates, and what a hand-written impl writes:
///
/// ```
/// use core::mem::{align_of, offset_of, size_of};
/// use ferry_rpc::service::{Schema, SchemaHash};
///
/// #[repr(C)]
/// struct Span {
///     start: u64,
///     len: u32,
/// }
///
/// impl Schema for Span {
///     const SCHEMA: u64 = SchemaHash::structure("Span", size_of::<Span>(), align_of::<Span>())
///         .field("start", offset_of!(Span, start), <u64 as Schema>::SCHEMA)
///         .field("len", offset_of!(Span, len), <u32 as Schema>::SCHEMA)
///         .finish();
/// }
///
/// #[repr(C)]
/// struct Swapped {
///     len: u32,
///     start: u64,
/// }
///
/// impl Schema for Swapped {
///     const SCHEMA: u64 = SchemaHash::structure("Span", size_of::<Swapped>(), align_of::<Swapped>())
///         .field("len", offset_of!(Swapped, len), <u32 as Schema>::SCHEMA)
///         .field("start", offset_of!(Swapped, start), <u64 as Schema>::SCHEMA)
///         .finish();
/// }
///
/// // The same name, size and alignment; another structure.
/// assert_eq!(size_of::<Span>(), size_of::<Swapped>());
/// assert_ne!(Span::SCHEMA, Swapped::SCHEMA);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SchemaHash(u64);

impl SchemaHash {
    const fn start(kind: &[u8], name: &str, size: usize, align: usize) -> Self {
        let mut h = fnv1a_64(FNV64_OFFSET, b"ferry-schema\0");
        h = fnv1a_64(h, kind);
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, b"\0");
        h = fnv1a_64(h, &(size as u64).to_le_bytes());
        h = fnv1a_64(h, &(align as u64).to_le_bytes());
        SchemaHash(h)
    }

    /// The schema of a primitive type: nothing but its name, size and alignment.
    pub const fn primitive(name: &str, size: usize, align: usize) -> Self {
        Self::start(b"primitive\0", name, size, align)
    }

    /// The schema of an array of `len` elements whose schema is `element`.
    pub const fn array(element: u64, len: usize, size: usize, align: usize) -> Self {
        let mut h = Self::start(b"array\0", "", size, align).0;
        h = fnv1a_64(h, &element.to_le_bytes());
        h = fnv1a_64(h, &(len as u64).to_le_bytes());
        SchemaHash(h)
    }

    /// Starts the schema of struct `name` (its fields follow, [`field`](Self::field)).
    pub const fn structure(name: &str, size: usize, align: usize) -> Self {
        Self::start(b"struct\0", name, size, align)
    }

    /// Starts the schema of enum `name` with representation `repr` (the inside of its
    /// `#[repr(..)]` as written, empty for none); its variants follow
    /// ([`variant`](Self::variant), then the variant's fields, [`variant_field`](Self::variant_field)).
    pub const fn enumeration(name: &str, repr: &str, size: usize, align: usize) -> Self {
        let mut h = Self::start(b"enum\0", name, size, align).0;
        h = fnv1a_64(h, repr.as_bytes());
        h = fnv1a_64(h, b"\0");
        SchemaHash(h)
    }

    /// Adds a struct's field: its name (`"0"`, `"1"`, ... in a tuple struct), its byte offset and
    /// its type's schema.
    pub const fn field(self, name: &str, offset: usize, schema: u64) -> Self {
        let mut h = fnv1a_64(self.0, b"\0field\0");
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, b"\0");
        h = fnv1a_64(h, &(offset as u64).to_le_bytes());
        h = fnv1a_64(h, &schema.to_le_bytes());
        SchemaHash(h)
    }

    /// Adds an enum's variant: its name and its discriminant's value (as `i128`; an unsigned
    /// discriminant above `i128::MAX` wraps, which keeps values apart).
    pub const fn variant(self, name: &str, discriminant: i128) -> Self {
        let mut h = fnv1a_64(self.0, b"\0variant\0");
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, b"\0");
        h = fnv1a_64(h, &discriminant.to_le_bytes());
        SchemaHash(h)
    }

    /// Adds a field of the variant added last: its name (`"0"`, `"1"`, ... in a tuple variant)
    /// and its type's schema. Its offset follows from the enum's `repr` and the fields before it.
    pub const fn variant_field(self, name: &str, schema: u64) -> Self {
        let mut h = fnv1a_64(self.0, b"\0variant-field\0");
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, b"\0");
        h = fnv1a_64(h, &schema.to_le_bytes());
        SchemaHash(h)
    }

    /// The hash.
    pub const fn finish(self) -> u64 {
        self.0
    }
}

/// `Schema` for primitive types: their name, size and alignment.
macro_rules! primitives {
    ($($ty:ty),* $(,)?) => {
        $(
            impl Schema for $ty {
                const SCHEMA: u64 = SchemaHash::primitive(
                    stringify!($ty),
                    core::mem::size_of::<$ty>(),
                    core::mem::align_of::<$ty>(),
                )
                .finish();
            }
        )*
    };
}

primitives!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    char,
    ()
);

impl<T: Schema, const N: usize> Schema for [T; N] {
    const SCHEMA: u64 = SchemaHash::array(
        T::SCHEMA,
        N,
        core::mem::size_of::<[T; N]>(),
        core::mem::align_of::<[T; N]>(),
    )
    .finish();
}

/// A marker of no bytes: the same schema whatever it marks.
impl<T: ?Sized> Schema for PhantomData<T> {
    const SCHEMA: u64 = SchemaHash::primitive("PhantomData", 0, 1).finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_differ_from_each_other() {
        let all = [
            u8::SCHEMA,
            u16::SCHEMA,
            u32::SCHEMA,
            u64::SCHEMA,
            u128::SCHEMA,
            usize::SCHEMA,
            i8::SCHEMA,
            i16::SCHEMA,
            i32::SCHEMA,
            i64::SCHEMA,
            i128::SCHEMA,
            isize::SCHEMA,
            f32::SCHEMA,
            f64::SCHEMA,
            bool::SCHEMA,
            char::SCHEMA,
            <()>::SCHEMA,
            <[u8; 4]>::SCHEMA,
            <[u32; 1]>::SCHEMA,
            <[u8; 5]>::SCHEMA,
            <PhantomData<u8>>::SCHEMA,
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(<PhantomData<u8>>::SCHEMA, <PhantomData<str>>::SCHEMA);
    }

    #[test]
    fn every_part_of_a_struct_counts() {
        let base = SchemaHash::structure("P", 16, 8)
            .field("a", 0, u64::SCHEMA)
            .field("b", 8, u64::SCHEMA)
            .finish();
        let again = SchemaHash::structure("P", 16, 8)
            .field("a", 0, u64::SCHEMA)
            .field("b", 8, u64::SCHEMA)
            .finish();
        assert_eq!(base, again);
        let others = [
            SchemaHash::structure("Q", 16, 8)
                .field("a", 0, u64::SCHEMA)
                .field("b", 8, u64::SCHEMA),
            SchemaHash::structure("P", 16, 8)
                .field("b", 0, u64::SCHEMA)
                .field("a", 8, u64::SCHEMA),
            SchemaHash::structure("P", 16, 8)
                .field("a", 8, u64::SCHEMA)
                .field("b", 0, u64::SCHEMA),
            SchemaHash::structure("P", 16, 8)
                .field("a", 0, i64::SCHEMA)
                .field("b", 8, u64::SCHEMA),
            SchemaHash::structure("P", 16, 16)
                .field("a", 0, u64::SCHEMA)
                .field("b", 8, u64::SCHEMA),
            SchemaHash::enumeration("P", "", 16, 8)
                .variant("a", 0)
                .variant_field("b", u64::SCHEMA),
        ];
        for other in others {
            assert_ne!(base, other.finish());
        }
        let e = |d| {
            SchemaHash::enumeration("E", "u8", 1, 1)
                .variant("A", d)
                .finish()
        };
        assert_ne!(e(1), e(2));
        assert_ne!(e(-1), e(255));
    }
}

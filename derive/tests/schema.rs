//! The fingerprint covers the structure of every type that crosses (`#[derive(Schema)]`): two
//! definitions of one service whose fixed types agree in name and size but not in what their
//! bytes mean get different fingerprints, wherever the type is used (argument, reply, error) and
//! however deep the change is; two equal definitions get equal ones.

use ferry_rpc::service::{self, Schema as _, Service};

/// A module holding the given types, one of them named `T`, and three services of one name that
/// carry `T` as an argument, as a reply and as an error.
macro_rules! definition {
    ($module:ident: $($item:item)*) => {
        #[allow(dead_code)]
        mod $module {
            use ferry_derive::{RpcOpcodes, Schema};
            use zerocopy::{Immutable, IntoBytes, KnownLayout, TryFromBytes};

            $(
                #[derive(Clone, Copy, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema)]
                $item
            )*

            #[derive(RpcOpcodes)]
            #[rpc(service = "schema.arg")]
            pub enum ByArg {
                #[rpc(response = u64)]
                Call { t: T, n: u32 },
            }

            #[derive(RpcOpcodes)]
            #[rpc(service = "schema.reply")]
            pub enum ByReply {
                #[rpc(response = T)]
                Call { n: u32 },
            }

            #[derive(RpcOpcodes)]
            #[rpc(service = "schema.error")]
            pub enum ByError {
                #[rpc(response = u64, error = T)]
                Call { n: u32 },
            }
        }
    };
}

// Issue 34's case: two `u64` fields swapped, same names, same size.
definition!(ab: #[repr(C)] pub struct T { a: u64, b: u64 });
definition!(ab_again: #[repr(C)] pub struct T { a: u64, b: u64 });
definition!(ba: #[repr(C)] pub struct T { b: u64, a: u64 });
// A field renamed.
definition!(ac: #[repr(C)] pub struct T { a: u64, c: u64 });
// A field's type changed to one of the same size and every byte pattern valid.
definition!(a_signed: #[repr(C)] pub struct T { a: i64, b: u64 });
// A tuple struct's fields swapped.
definition!(tuple_ab: #[repr(C)] pub struct T(u32, [u8; 4]););
definition!(tuple_ba: #[repr(C)] pub struct T([u8; 4], u32););
// A discriminant renumbered; written differently with the same values.
definition!(mode_12: #[repr(u8)] pub enum T { Add = 1, Sub = 2 });
definition!(mode_13: #[repr(u8)] pub enum T { Add = 1, Sub = 3 });
definition!(mode_12_implicit: #[repr(u8)] pub enum T { Add = 1, Sub });
definition!(mode_21: #[repr(u8)] pub enum T { Sub = 1, Add = 2 });
// A change two levels down: a nested struct's fields swapped.
definition!(nested_xy:
    #[repr(C)] pub struct Inner { x: u32, y: u32 }
    #[repr(C)] pub struct T { inner: Inner, n: u64 }
);
definition!(nested_yx:
    #[repr(C)] pub struct Inner { y: u32, x: u32 }
    #[repr(C)] pub struct T { inner: Inner, n: u64 }
);
// Enums with data: a variant's fields swapped, a discriminant moved.
definition!(shape_base: #[repr(u8)] pub enum T { Dot([u8; 2]), Line { from: u8, to: u8 } });
definition!(shape_swapped: #[repr(u8)] pub enum T { Dot([u8; 2]), Line { to: u8, from: u8 } });
definition!(shape_moved: #[repr(u8)] pub enum T { Dot([u8; 2]), Line { from: u8, to: u8 } = 5 });
definition!(shape_written: #[repr(u8)] pub enum T { Dot([u8; 2]) = 0, Line { from: u8, to: u8 } = 1 });

/// Every service's fingerprint in definition `$m`.
macro_rules! prints {
    ($m:ident) => {
        [
            $m::ByArg::FINGERPRINT,
            $m::ByReply::FINGERPRINT,
            $m::ByError::FINGERPRINT,
        ]
    };
}

/// `a` and `b` differ in every service, but not in what the fingerprint hashed before the types'
/// structure: their opcodes and the types' sizes.
macro_rules! differ {
    ($a:ident, $b:ident) => {{
        assert_eq!($a::ByArg::OPCODES, $b::ByArg::OPCODES);
        assert_eq!(size_of::<$a::T>(), size_of::<$b::T>());
        assert_ne!($a::T::SCHEMA, $b::T::SCHEMA);
        let (a, b) = (prints!($a), prints!($b));
        for i in 0..3 {
            assert_ne!(
                a[i],
                b[i],
                "{} and {} give service {i} one fingerprint",
                stringify!($a),
                stringify!($b)
            );
        }
    }};
}

/// `a` and `b` are one schema.
macro_rules! same {
    ($a:ident, $b:ident) => {{
        assert_eq!($a::T::SCHEMA, $b::T::SCHEMA);
        assert_eq!(prints!($a), prints!($b));
    }};
}

#[test]
fn swapped_fields_of_one_size_give_another_fingerprint() {
    differ!(ab, ba);
    differ!(tuple_ab, tuple_ba);
}

#[test]
fn a_renamed_or_retyped_field_gives_another_fingerprint() {
    differ!(ab, ac);
    differ!(ab, a_signed);
}

#[test]
fn a_renumbered_discriminant_gives_another_fingerprint() {
    differ!(mode_12, mode_13);
    differ!(mode_12, mode_21);
    differ!(shape_base, shape_moved);
}

#[test]
fn a_change_inside_a_nested_type_or_a_variant_gives_another_fingerprint() {
    differ!(nested_xy, nested_yx);
    assert_ne!(nested_xy::Inner::SCHEMA, nested_yx::Inner::SCHEMA);
    differ!(shape_base, shape_swapped);
}

#[test]
fn equal_definitions_give_equal_fingerprints() {
    same!(ab, ab_again);
    // A discriminant's value counts, not how it is written.
    same!(mode_12, mode_12_implicit);
    same!(shape_base, shape_written);
    // The fingerprint of a definition, by the documented builder: a fixed type's shape carries
    // its schema.
    let expected = service::Fingerprint::new("schema.arg")
        .begin_call("Call", service::hash_opcode("schema.arg", "Call"))
        .arg("t", "T", service::Shape::of::<ab::T>())
        .arg("n", "u32", service::Shape::of::<u32>())
        .reply("u64", service::Shape::of::<u64>())
        .finish();
    assert_eq!(ab::ByArg::FINGERPRINT, expected);
    assert_eq!(
        service::Shape::of::<ab::T>(),
        service::Shape::Fixed {
            size: 16,
            align: 8,
            schema: ab::T::SCHEMA
        }
    );
}

/// Generic types: each parameter's schema is part of the whole, through the fields.
#[test]
fn a_generic_type_takes_its_parameters_schemas() {
    use ferry_derive::Schema;

    #[derive(Schema)]
    #[repr(C)]
    #[allow(dead_code)]
    struct Pair<T>(T, T);

    #[derive(Schema)]
    #[repr(C)]
    #[allow(dead_code)]
    struct Tagged<T: Copy, const N: usize> {
        tag: [u8; N],
        value: T,
    }

    assert_eq!(Pair::<u32>::SCHEMA, Pair::<u32>::SCHEMA);
    assert_ne!(Pair::<u32>::SCHEMA, Pair::<i32>::SCHEMA);
    assert_ne!(Pair::<u32>::SCHEMA, Pair::<f32>::SCHEMA);
    assert_ne!(Tagged::<u32, 4>::SCHEMA, Tagged::<u32, 8>::SCHEMA);
    assert_ne!(Tagged::<u32, 4>::SCHEMA, Tagged::<i32, 4>::SCHEMA);
}

/// A unit struct and a fieldless enum without a `repr`, which the derive takes too.
#[test]
fn unit_structs_and_plain_enums_have_schemas() {
    mod one {
        #[derive(ferry_derive::Schema)]
        pub struct Nothing;

        #[derive(ferry_derive::Schema)]
        #[allow(dead_code)]
        pub enum Plain {
            A,
            B,
        }
    }

    mod two {
        /// The same variants, in another order (so with other values).
        #[derive(ferry_derive::Schema)]
        #[allow(dead_code)]
        pub enum Plain {
            B,
            A,
        }
    }

    assert_ne!(one::Nothing::SCHEMA, <()>::SCHEMA);
    assert_ne!(one::Plain::SCHEMA, two::Plain::SCHEMA);
}

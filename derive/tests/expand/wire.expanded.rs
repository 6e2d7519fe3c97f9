#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[repr(C)]
pub struct Span {
    start: u64,
    len: u64,
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Span {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::structure(
                "Span",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .field(
                "start",
                ::core::mem::offset_of!(Self, start),
                <u64 as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .field(
                "len",
                ::core::mem::offset_of!(Self, len),
                <u64 as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .finish()
    };
}
#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Pair<T>(T, T);
#[automatically_derived]
impl<T> ::ferry_rpc::service::Schema for Pair<T>
where
    T: ::ferry_rpc::service::Schema,
{
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::structure(
                "Pair",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .field(
                "0",
                ::core::mem::offset_of!(Self, 0),
                <T as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .field(
                "1",
                ::core::mem::offset_of!(Self, 1),
                <T as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .finish()
    };
}
#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[repr(transparent)]
pub struct Id(u32);
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Id {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::structure(
                "Id",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .field(
                "0",
                ::core::mem::offset_of!(Self, 0),
                <u32 as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .finish()
    };
}
#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[repr(u32)]
pub enum Mode {
    Add = 1,
    Sub,
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Mode {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::enumeration(
                "Mode",
                "u32",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .variant("Add", Self::Add as i128)
            .variant("Sub", Self::Sub as i128)
            .finish()
    };
}
#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[repr(u8)]
pub enum Refusal {
    Full = 1,
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Refusal {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::enumeration(
                "Refusal",
                "u8",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .variant("Full", Self::Full as i128)
            .finish()
    };
}
::core::compile_error! {
    "field type: `String` cannot cross by value: its bytes are in this side's heap; a `#[wire]` type crosses as its own bytes, so send text as a call's `Text` argument or reply (any length up to the call's `limit`, 64 KiB unless set), or hold a fixed `[u8; N]` here"
}
#[derive(
    ::ferry_rpc::zerocopy::TryFromBytes,
    ::ferry_rpc::zerocopy::IntoBytes,
    ::ferry_rpc::zerocopy::Immutable,
    ::ferry_rpc::zerocopy::KnownLayout
)]
#[zerocopy(crate = "::ferry_rpc::zerocopy")]
#[repr(C)]
pub struct Named {
    id: u32,
    name: ::ferry_rpc::__private::CannotCross<String>,
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Named {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::structure(
                "Named",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .field(
                "id",
                ::core::mem::offset_of!(Self, id),
                <u32 as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .field(
                "name",
                ::core::mem::offset_of!(Self, name),
                <::ferry_rpc::__private::CannotCross<
                    String,
                > as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .finish()
    };
}

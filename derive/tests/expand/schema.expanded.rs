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
                <u32 as ::ferry_rpc::service::Schema>::SCHEMA,
            )
            .finish()
    };
}
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
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Marker {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::structure(
                "Marker",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .finish()
    };
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Mode {
    const SCHEMA: u64 = {
        ::ferry_rpc::service::SchemaHash::enumeration(
                "Mode",
                "u8",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .variant("Add", Self::Add as i128)
            .variant("Sub", Self::Sub as i128)
            .finish()
    };
}
#[automatically_derived]
impl ::ferry_rpc::service::Schema for Shape {
    const SCHEMA: u64 = {
        let __schema_d0: u16 = 0;
        let __schema_d1: u16 = 7;
        let __schema_d2: u16 = __schema_d1 + 1;
        ::ferry_rpc::service::SchemaHash::enumeration(
                "Shape",
                "C,u16",
                ::core::mem::size_of::<Self>(),
                ::core::mem::align_of::<Self>(),
            )
            .variant("Dot", __schema_d0 as i128)
            .variant("Line", __schema_d1 as i128)
            .variant_field("from", <Span as ::ferry_rpc::service::Schema>::SCHEMA)
            .variant_field("to", <Span as ::ferry_rpc::service::Schema>::SCHEMA)
            .variant("Box", __schema_d2 as i128)
            .variant_field("0", <Pair<u32> as ::ferry_rpc::service::Schema>::SCHEMA)
            .finish()
    };
}

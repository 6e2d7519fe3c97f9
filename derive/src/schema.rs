//! `#[derive(Schema)]`: a type's structure as a `const` hash (`ferry_rpc::service::Schema`), so
//! that a service's fingerprint covers what the bytes of its fixed arguments, replies and errors
//! mean, not only their size.
//!
//! One pass, as the input is small: read the type (a struct's fields; an enum's `repr`, variants,
//! discriminants and fields) and reject what has no one structure (a union, a misplaced or
//! unknown `#[schema]` setting) as spanned errors; then generate one `impl Schema` whose
//! `SCHEMA` is built with `ferry_rpc::service::SchemaHash`:
//!
//! - struct: its name, size, alignment, then per field its name, `offset_of!` and its type's
//!   `SCHEMA`;
//! - enum: its name, the inside of its `#[repr(..)]`, size, alignment, then per variant its name
//!   and discriminant value (`Self::V as i128` for an enum of unit variants; otherwise evaluated
//!   from the written discriminants in the `repr`'s integer type, each unwritten one the previous
//!   plus one), then the variant's fields by name and `SCHEMA`.
//!
//! Every type parameter gets a `Schema` bound. The generated code names only `core` and
//! `ferry_rpc` (through `krate`), so `no_std` and GPU crates derive it too. On error the output
//! is the errors plus a stand-in impl (`fallback::schema`), so uses of the type report nothing
//! further.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields, Ident, LitStr};

use crate::{fallback, krate};

/// The derive: read and check, then generate; on misuse, the errors plus the fallback.
pub fn derive(input: TokenStream) -> TokenStream {
    krate::derive(input, "schema", "Schema", expand, fallback::schema)
}

pub fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    check_settings(input)?;
    let name = input.ident.to_string();
    let size = quote!(::core::mem::size_of::<Self>());
    let align = quote!(::core::mem::align_of::<Self>());
    let hash = quote!(::ferry_rpc::service::SchemaHash);
    let body = match &input.data {
        Data::Struct(data) => {
            let fields = data.fields.iter().enumerate().map(|(i, f)| {
                let (label, member) = field_name(f.ident.as_ref(), i);
                let schema = schema_of(&f.ty);
                quote!(.field(#label, ::core::mem::offset_of!(Self, #member), #schema))
            });
            quote! {
                #hash::structure(#name, #size, #align)
                    #( #fields )*
                    .finish()
            }
        }
        Data::Enum(data) => {
            let repr = repr(&input.attrs);
            let unit_only = data
                .variants
                .iter()
                .all(|v| matches!(v.fields, Fields::Unit));
            let int = repr_int(&input.attrs);
            let mut lets = Vec::new();
            let mut parts = Vec::new();
            for (i, v) in data.variants.iter().enumerate() {
                let vname = v.ident.to_string();
                let ident = &v.ident;
                let value = if unit_only {
                    quote!(Self::#ident as i128)
                } else {
                    // The discriminant as the enum evaluates it: written, or the previous plus
                    // one (0 for the first), in the repr's integer type.
                    let d = quote::format_ident!("__schema_d{}", i);
                    let expr = match (&v.discriminant, i) {
                        (Some((_, e)), _) => quote!(#e),
                        (None, 0) => quote!(0),
                        (None, _) => {
                            let prev = quote::format_ident!("__schema_d{}", i - 1);
                            quote!(#prev + 1)
                        }
                    };
                    lets.push(quote!(let #d: #int = #expr;));
                    quote!(#d as i128)
                };
                parts.push(quote!(.variant(#vname, #value)));
                for (j, f) in v.fields.iter().enumerate() {
                    let (label, _) = field_name(f.ident.as_ref(), j);
                    let schema = schema_of(&f.ty);
                    parts.push(quote!(.variant_field(#label, #schema)));
                }
            }
            quote! {
                #( #lets )*
                #hash::enumeration(#name, #repr, #size, #align)
                    #( #parts )*
                    .finish()
            }
        }
        Data::Union(data) => {
            return Err(syn::Error::new(
                data.union_token.span(),
                "#[derive(Schema)] does not take a union: its bytes have no one structure to \
                 hash. Send a struct or an enum, or implement `Schema` by hand with \
                 `ferry_rpc::service::SchemaHash`",
            ))
        }
    };
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    let params: Vec<Ident> = generics.type_params().map(|p| p.ident.clone()).collect();
    let where_clause = generics.make_where_clause();
    for p in params {
        where_clause
            .predicates
            .push(syn::parse_quote!(#p: ::ferry_rpc::service::Schema));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics ::ferry_rpc::service::Schema for #ident #ty_generics #where_clause {
            const SCHEMA: u64 = {
                #body
            };
        }
    })
}

/// A field's label in the hash (its name, or its index in a tuple) and how `offset_of!` names it.
fn field_name(ident: Option<&Ident>, index: usize) -> (String, TokenStream) {
    match ident {
        Some(ident) => (ident.to_string(), quote!(#ident)),
        None => {
            let member = syn::Index::from(index);
            (index.to_string(), member.into_token_stream())
        }
    }
}

/// The `SCHEMA` of a field's type, spanned at the type so that a missing impl points there.
fn schema_of(ty: &syn::Type) -> TokenStream {
    quote_spanned!(ty.span()=> <#ty as ::ferry_rpc::service::Schema>::SCHEMA)
}

/// The inside of every `#[repr(..)]`, as written without spaces, joined by `,` (empty for none).
fn repr(attrs: &[Attribute]) -> String {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("repr"))
        .filter_map(|a| a.meta.require_list().ok())
        .map(|l| l.tokens.to_string().replace(' ', ""))
        .collect::<Vec<_>>()
        .join(",")
}

/// The integer types a `repr` can give an enum's discriminants.
pub const INTS: [&str; 12] = [
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
];

/// The integer type of an enum's discriminants: the one its `repr` names, else `isize`.
fn repr_int(attrs: &[Attribute]) -> TokenStream {
    match repr_names(attrs)
        .into_iter()
        .filter(|id| INTS.contains(&id.to_string().as_str()))
        .last()
    {
        Some(id) => quote!(#id),
        None => quote!(isize),
    }
}

/// The names inside every `#[repr(..)]`, in order: `C`, `u8`, `transparent`, `align` (of
/// `align(8)`). Malformed ones are rustc's to report.
pub fn repr_names(attrs: &[Attribute]) -> Vec<Ident> {
    let mut names = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = attr.parse_nested_meta(|meta| {
            if let Some(id) = meta.path.get_ident() {
                names.push(id.clone());
            }
            if meta.input.peek(syn::token::Paren) {
                let _content;
                syn::parenthesized!(_content in meta.input);
            }
            Ok(())
        });
    }
    names
}

/// `#[schema(...)]`: only `crate = "path"`, only on the type.
fn check_settings(input: &DeriveInput) -> syn::Result<()> {
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("schema")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let _: LitStr = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown `#[schema]` setting: the only one is `crate = \"path\"`"))
            }
        })?;
    }
    let misplaced = |attrs: &[Attribute]| -> syn::Result<()> {
        match attrs.iter().find(|a| a.path().is_ident("schema")) {
            Some(a) => Err(syn::Error::new(
                a.span(),
                "`#[schema]` goes on the type, not on a field or a variant",
            )),
            None => Ok(()),
        }
    };
    let mut fields: Vec<&syn::Field> = Vec::new();
    match &input.data {
        Data::Struct(d) => fields.extend(d.fields.iter()),
        Data::Enum(d) => {
            for v in &d.variants {
                misplaced(&v.attrs)?;
                fields.extend(v.fields.iter());
            }
        }
        Data::Union(d) => fields.extend(d.fields.named.iter()),
    }
    for f in fields {
        misplaced(&f.attrs)?;
    }
    Ok(())
}

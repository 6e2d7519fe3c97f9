//! `#[wire]`: a type of the user's own made ready to cross as a fixed argument, reply or error, in
//! one line.
//!
//! What a fixed value needs, and what the attribute adds to the item:
//!
//! - zerocopy's `TryFromBytes` (the bytes received are checked to be a value), `IntoBytes` (a
//!   value is sent as its bytes), `Immutable` and `KnownLayout`, derived through the runtime's
//!   re-export of zerocopy (`#[zerocopy(crate = "...")]`), so the user's crate needs no zerocopy
//!   of its own;
//! - a `repr` where none fixes the layout: `repr(C)` on a struct, `repr(u32)` on an enum;
//! - the `Schema` impl (`schema::expand`), so a service's fingerprint covers the structure.
//!
//! The runtime's path is found as the derives find it (`krate`), or written as
//! `#[wire(crate = "path::to::ferry_rpc")]`.
//!
//! Checks come first. A field whose bytes are not its value (`String`, `Vec<u8>`, references,
//! boxes: `valid::stranded`) is one error at the field's type saying what to write instead, and
//! the field's type `T` becomes `ferry_rpc::__private::CannotCross<T>`, which is zerocopy and has
//! a `Schema`: the derives and the services using the type report nothing more, and code still
//! using the field as a `T` is told the field is a `CannotCross<T>`. A derive the attribute adds
//! that the item also names, a union, an item that is neither a struct nor an enum and an unknown
//! setting are errors too.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, LitStr, Token};

use crate::ast::combine;
use crate::valid::{stranded, Stranded, Stream};
use crate::{krate, schema};

/// zerocopy's derives that a value needs to cross.
const ZEROCOPY: [&str; 4] = ["TryFromBytes", "IntoBytes", "Immutable", "KnownLayout"];

/// The attribute: `args` its settings, `item` the type it is on.
pub fn attribute(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut input: DeriveInput = match syn::parse2(item.clone()) {
        Ok(input) => input,
        Err(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "`#[wire]` goes on a struct or an enum: a type of your own that crosses as a \
                 call's fixed argument, reply or error",
            );
            return error_and(e, item);
        }
    };
    if let Data::Union(u) = &input.data {
        let e = syn::Error::new(
            u.union_token.span(),
            "`#[wire]` takes a struct or an enum, not a union: a union's bytes have no one \
             structure to check when they arrive",
        );
        return error_and(e, item);
    }
    let mut errors = None;
    let path = match setting(args).and_then(|written| match written {
        Some(path) => Ok(path),
        None => krate::found("#[wire]", "wire"),
    }) {
        Ok(path) => path,
        Err(e) => {
            combine(&mut errors, e);
            quote!(::ferry_rpc)
        }
    };

    // What the attribute derives, less what the item derives itself (an error each).
    let written = derived(&input.attrs);
    let mut adds = |name: &str| match written.iter().find(|p| ends_with(p, name)) {
        Some(p) => {
            combine(
                &mut errors,
                syn::Error::new_spanned(
                    p,
                    format!("`#[wire]` derives `{name}` itself: remove it from this list"),
                ),
            );
            false
        }
        None => true,
    };
    let zerocopy: Vec<_> = ZEROCOPY
        .into_iter()
        .filter(|name| adds(name))
        .map(|name| format_ident!("{name}"))
        .collect();
    let with_schema = adds("Schema");

    for ty in field_types(&mut input.data) {
        if let Some(stranded) = stranded(ty) {
            let msg = format!("field type: {}", message(&stranded));
            combine(&mut errors, syn::Error::new_spanned(stranded.ty, msg));
            *ty = syn::parse_quote_spanned!(ty.span()=> ::ferry_rpc::__private::CannotCross<#ty>);
        }
    }
    if let Some(repr) = missing_repr(&input) {
        input.attrs.push(repr);
    }

    let mut generated = TokenStream::new();
    if !zerocopy.is_empty() {
        let zerocopy_path = format!("{}::zerocopy", path.to_string().replace(' ', ""));
        generated.extend(quote! {
            #[derive(#(::ferry_rpc::zerocopy::#zerocopy),*)]
            #[zerocopy(crate = #zerocopy_path)]
        });
    }
    generated.extend(quote!(#input));
    if with_schema {
        match schema::expand(&input) {
            Ok(tokens) => generated.extend(tokens),
            Err(e) => combine(&mut errors, e),
        }
    }
    let errors = errors.map(|e| e.to_compile_error());
    let generated = krate::substitute(generated, &path);
    quote!(#errors #generated)
}

/// `#[wire(crate = "path")]`: the path, if written.
fn setting(args: TokenStream) -> syn::Result<Option<TokenStream>> {
    let mut path = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            let lit: LitStr = meta.value()?.parse()?;
            let written: syn::Path = lit.parse()?;
            path = Some(quote!(#written));
            Ok(())
        } else {
            Err(meta.error(
                "unknown `#[wire]` setting: the only one is `crate = \"path::to::ferry_rpc\"`",
            ))
        }
    });
    syn::parse::Parser::parse2(parser, args)?;
    Ok(path)
}

/// The error, and the item as written (so that its uses still resolve).
fn error_and(e: syn::Error, item: TokenStream) -> TokenStream {
    let e = e.to_compile_error();
    quote!(#e #item)
}

/// Every path in the item's `#[derive(..)]` lists.
fn derived(attrs: &[Attribute]) -> Vec<syn::Path> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .filter_map(|a| {
            a.parse_args_with(Punctuated::<syn::Path, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .collect()
}

/// Whether `path`'s last segment is `name` (`zerocopy::IntoBytes`).
fn ends_with(path: &syn::Path, name: &str) -> bool {
    path.segments.last().is_some_and(|s| s.ident == name)
}

/// The types of a struct's fields, or of every variant's fields.
fn field_types(data: &mut Data) -> Vec<&mut syn::Type> {
    match data {
        Data::Struct(s) => s.fields.iter_mut().map(|f| &mut f.ty).collect(),
        Data::Enum(e) => e
            .variants
            .iter_mut()
            .flat_map(|v| v.fields.iter_mut().map(|f| &mut f.ty))
            .collect(),
        Data::Union(_) => Vec::new(),
    }
}

/// What a field that cannot cross is told: why, and what to write instead.
fn message(stranded: &Stranded<'_>) -> String {
    let why = &stranded.why;
    match stranded.stream {
        Some(stream) => {
            let data = match stream {
                Stream::Text => "text",
                Stream::Bytes => "bytes",
            };
            format!(
                "{why}; a `#[wire]` type crosses as its own bytes, so send {data} as a call's \
                 `{stream}` argument or reply (any length up to the call's `limit`, 64 KiB \
                 unless set), or hold a fixed `[u8; N]` here"
            )
        }
        None => format!(
            "{why}; a `#[wire]` type crosses as its own bytes, so hold fixed-size values here \
             (integers, `bool`, arrays, other `#[wire]` types)"
        ),
    }
}

/// The `repr` to add where none fixes the layout: `repr(C)` on a struct without `C`,
/// `transparent` or `packed`; `repr(u32)` on an enum without `C` or an integer.
fn missing_repr(input: &DeriveInput) -> Option<Attribute> {
    let written = schema::repr_names(&input.attrs);
    let has = |names: &[&str]| {
        written
            .iter()
            .any(|id| names.contains(&id.to_string().as_str()))
    };
    match &input.data {
        Data::Struct(_) if !has(&["C", "transparent", "packed"]) => {
            Some(syn::parse_quote!(#[repr(C)]))
        }
        Data::Enum(_) if !has(&["C"]) && !has(&schema::INTS) => {
            Some(syn::parse_quote!(#[repr(u32)]))
        }
        _ => None,
    }
}

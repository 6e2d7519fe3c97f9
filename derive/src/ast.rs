//! The model: a service enum read into calls with their settings and opcodes. Building it parses
//! the attributes (`attr`); checking it is `valid`'s job, so the model may still hold misuse.

use proc_macro2::Span;
use syn::{Attribute, Data, DeriveInput, Fields, Ident, Type, Visibility};

use crate::attr::{self, CallAttrs};

/// A service: the enum and its calls.
pub struct Service<'a> {
    pub input: &'a DeriveInput,
    pub ident: &'a Ident,
    pub vis: &'a Visibility,
    /// The name hashed into opcodes and the fingerprint.
    pub name: String,
    /// `class = N`, if the service uses the class scheme.
    pub class: Option<u16>,
    pub calls: Vec<Call<'a>>,
}

/// One call: a variant.
pub struct Call<'a> {
    pub ident: &'a Ident,
    /// The variant's doc comments, carried to the generated methods.
    pub docs: Vec<&'a Attribute>,
    pub fields: &'a Fields,
    pub attrs: CallAttrs,
    /// Position in the enum.
    pub index: usize,
    /// The opcode: explicit, or from the service's scheme.
    pub opcode: u32,
    /// Where the opcode came from (the `opcode = N` literal, or the variant).
    pub opcode_span: Span,
    /// The method name on the client and the server trait.
    pub method: String,
    /// The arguments: the variant's fields, in order.
    pub args: Vec<Arg<'a>>,
}

/// One argument: a field of the call's variant.
pub struct Arg<'a> {
    /// Its name (a tuple variant's field `i` is `arg{i}`).
    pub ident: Ident,
    pub ty: &'a Type,
    pub wire: Wire<'a>,
}

/// How an argument, a reply or an error crosses the port.
pub enum Wire<'a> {
    /// `()`: nothing.
    Unit,
    /// A fixed-size value, its bytes packed with the other fixed ones.
    Fixed(&'a Type),
    /// `Bytes`: a byte stream.
    Bytes,
    /// `Text`: a UTF-8 text stream.
    Text,
}

impl<'a> Wire<'a> {
    /// Reads a type written as a field or in `response = ...`/`error = ...`.
    pub fn of(ty: &'a Type) -> Wire<'a> {
        match ty {
            Type::Tuple(t) if t.elems.is_empty() => Wire::Unit,
            _ if last_ident(ty, "Bytes") => Wire::Bytes,
            _ if last_ident(ty, "Text") => Wire::Text,
            Type::Paren(p) => Wire::of(&p.elem),
            Type::Group(g) => Wire::of(&g.elem),
            _ => Wire::Fixed(ty),
        }
    }

    /// Whether it crosses as a stream.
    pub fn is_stream(&self) -> bool {
        matches!(self, Wire::Bytes | Wire::Text)
    }
}

/// Whether `ty` is a path whose last segment is `name`, with no generic arguments (`Bytes`,
/// `ferry_rpc::service::Bytes`).
fn last_ident(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == name && s.arguments.is_empty()),
        _ => false,
    }
}

impl Call<'_> {
    /// The reply, if the call has one (a call without `response` replies `()`; a one-way call
    /// has none).
    pub fn response(&self) -> Option<Wire<'_>> {
        if self.oneway() {
            return None;
        }
        Some(
            self.attrs
                .response
                .as_ref()
                .map_or(Wire::Unit, |t| Wire::of(&t.value)),
        )
    }

    /// The error type, if the call has one.
    pub fn error(&self) -> Option<&Type> {
        self.attrs.error.as_ref().map(|t| &t.value)
    }

    /// Whether the call is one-way.
    pub fn oneway(&self) -> bool {
        self.attrs.oneway.is_some()
    }

    /// The fixed arguments.
    pub fn fixed_args(&self) -> impl Iterator<Item = &Arg<'_>> {
        self.args.iter().filter(|a| !a.wire.is_stream())
    }

    /// The streamed argument (the last), if any.
    pub fn stream_arg(&self) -> Option<&Arg<'_>> {
        self.args.last().filter(|a| a.wire.is_stream())
    }

    /// Whether the reply is a stream.
    pub fn streams_reply(&self) -> bool {
        self.response().is_some_and(|w| w.is_stream())
    }

    /// Whether the client gets a `<method>_with` form: a `Bytes` argument and a reply that is not
    /// a stream (the caller fills the bytes in place).
    pub fn fills_in_place(&self) -> bool {
        self.stream_arg()
            .is_some_and(|a| matches!(a.wire, Wire::Bytes))
            && !self.streams_reply()
    }
}

/// The default `limit` of a stream per lane: 64 KiB.
pub const DEFAULT_LIMIT: u64 = 64 * 1024;

impl<'a> Service<'a> {
    /// Reads the enum. Fails only where nothing sensible can be modelled (not an enum, a
    /// malformed attribute).
    pub fn from_syn(input: &'a DeriveInput) -> syn::Result<Self> {
        let data =
            match &input.data {
                Data::Enum(data) => data,
                Data::Struct(s) => return Err(syn::Error::new(
                    s.struct_token.span,
                    "`RpcOpcodes` is derived on an enum with one variant per call, not on a struct",
                )),
                Data::Union(u) => return Err(syn::Error::new(
                    u.union_token.span,
                    "`RpcOpcodes` is derived on an enum with one variant per call, not on a union",
                )),
            };
        let service = attr::service(&input.attrs)?;
        let name = service
            .service
            .as_ref()
            .map_or_else(|| input.ident.to_string(), |s| s.value.clone());
        let class = service.class.as_ref().map(|c| c.value);
        let mut calls = Vec::new();
        let mut errors: Option<syn::Error> = None;
        for (index, variant) in data.variants.iter().enumerate() {
            let attrs = match attr::call(&variant.attrs) {
                Ok(a) => a,
                Err(e) => {
                    combine(&mut errors, e);
                    continue;
                }
            };
            if let Some((_, value)) = &variant.discriminant {
                // A discriminant would read as the call's opcode, which it is not.
                combine(
                    &mut errors,
                    syn::Error::new(
                        syn::spanned::Spanned::span(value),
                        "a call's opcode is not its discriminant: remove it, and give the call \
                         `#[rpc(opcode = N)]` to choose its opcode",
                    ),
                );
            }
            let call_name = variant.ident.to_string();
            let (opcode, opcode_span) = match (&attrs.opcode, class) {
                (Some(op), _) => (op.value, op.span),
                (None, Some(class)) => (
                    ((class as u32) << 16) | (index as u32 & 0xFFFF),
                    variant.ident.span(),
                ),
                (None, None) => (hash_opcode(&name, &call_name), variant.ident.span()),
            };
            let args = variant
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| Arg {
                    ident: f.ident.clone().unwrap_or_else(|| {
                        Ident::new(&format!("arg{i}"), syn::spanned::Spanned::span(&f.ty))
                    }),
                    ty: &f.ty,
                    wire: Wire::of(&f.ty),
                })
                .collect();
            calls.push(Call {
                args,
                ident: &variant.ident,
                docs: variant
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("doc"))
                    .collect(),
                fields: &variant.fields,
                attrs,
                index,
                opcode,
                opcode_span,
                method: snake_case(&call_name),
            });
        }
        if let Some(e) = errors {
            return Err(e);
        }
        Ok(Service {
            input,
            ident: &input.ident,
            vis: &input.vis,
            name,
            class,
            calls,
        })
    }
}

/// Adds `e` to the errors found so far.
pub fn combine(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// FNV-1a 32 (must match `ferry_rpc::service::fnv1a_32`).
fn fnv1a_32(mut state: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        state ^= b as u32;
        state = state.wrapping_mul(0x0100_0193);
    }
    state
}

/// The hash scheme (must match `ferry_rpc::service::hash_opcode`).
pub fn hash_opcode(service: &str, call: &str) -> u32 {
    let mut h = fnv1a_32(0x811c_9dc5, service.as_bytes());
    h = fnv1a_32(h, b"::");
    h = fnv1a_32(h, call.as_bytes());
    0x8000_0000 | (h & 0x7FFF_FFFF)
}

/// `GetValue` → `get_value`, `HTTPGet` → `http_get`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                None | Some('_') => false,
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) => p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()),
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_splits_words_and_acronyms() {
        assert_eq!(snake_case("Get"), "get");
        assert_eq!(snake_case("GetValue"), "get_value");
        assert_eq!(snake_case("HTTPGet"), "http_get");
        assert_eq!(snake_case("Put2Bytes"), "put2_bytes");
        assert_eq!(snake_case("already_snake"), "already_snake");
    }

    #[test]
    fn hash_opcode_is_fnv1a_with_top_bit() {
        // FNV-1a 32 of "a::b" computed by hand from the reference constants.
        let mut h: u32 = 0x811c_9dc5;
        for b in b"a::b" {
            h ^= *b as u32;
            h = h.wrapping_mul(16_777_619);
        }
        assert_eq!(hash_opcode("a", "b"), 0x8000_0000 | (h & 0x7FFF_FFFF));
        assert_ne!(hash_opcode("a", "b"), hash_opcode("b", "a"));
    }
}

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
    /// The method name on the client extension and the server trait.
    pub method: String,
}

/// How a request or response crosses the port.
pub enum Wire<'a> {
    /// `()`: nothing but the call itself.
    Unit,
    /// A fixed-size zerocopy value in one slot.
    Fixed(&'a Type),
    /// `[u8]`: a byte stream.
    Bytes,
    /// `str`: a UTF-8 text stream.
    Text,
}

impl<'a> Wire<'a> {
    /// Reads a type written in `request = ...`/`response = ...`.
    pub fn of(ty: &'a Type) -> Wire<'a> {
        match ty {
            Type::Tuple(t) if t.elems.is_empty() => Wire::Unit,
            Type::Slice(s) if is_ident(&s.elem, "u8") => Wire::Bytes,
            _ if is_ident(ty, "str") => Wire::Text,
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

fn is_ident(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(p) => p.qself.is_none() && p.path.is_ident(name),
        _ => false,
    }
}

impl Call<'_> {
    /// The request, if written.
    pub fn request(&self) -> Option<Wire<'_>> {
        self.attrs.request.as_ref().map(|t| Wire::of(&t.value))
    }

    /// The response, if written.
    pub fn response(&self) -> Option<Wire<'_>> {
        self.attrs.response.as_ref().map(|t| Wire::of(&t.value))
    }

    /// Whether the call is one-way.
    pub fn oneway(&self) -> bool {
        self.attrs.oneway.is_some()
    }

    /// The most bytes one lane may stream in a request.
    pub fn limit(&self) -> u64 {
        self.attrs.limit.as_ref().map_or(DEFAULT_LIMIT, |l| l.value)
    }
}

/// The default `limit` of a streamed request per lane: 64 KiB.
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
            let call_name = variant.ident.to_string();
            let (opcode, opcode_span) = match (&attrs.opcode, class) {
                (Some(op), _) => (op.value, op.span),
                (None, Some(class)) => (
                    ((class as u32) << 16) | (index as u32 & 0xFFFF),
                    variant.ident.span(),
                ),
                (None, None) => (hash_opcode(&name, &call_name), variant.ident.span()),
            };
            calls.push(Call {
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

/// FNV-1a 32 (must match `rpc_core::service::fnv1a_32`).
fn fnv1a_32(mut state: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        state ^= b as u32;
        state = state.wrapping_mul(0x0100_0193);
    }
    state
}

/// The hash scheme (must match `rpc_core::service::hash_opcode`).
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

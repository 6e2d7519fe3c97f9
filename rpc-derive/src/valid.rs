//! Checks on the model: everything the derive can reject before generating code. Type sizes and
//! zerocopy traits are not known to a macro; `expand` emits compile-time assertions for those,
//! spanned at the user's type.

use std::collections::HashMap;

use syn::spanned::Spanned;
use syn::{Fields, Type};

use crate::ast::{combine, Call, Service, Wire};

/// Opcodes from here up belong to the protocol (`rpc_core::service::RESERVED_OPCODES`).
const RESERVED_OPCODES: u32 = 0xFFFF_FF00;

/// Method names a call cannot take: inherent methods of `rpc_core::Process` (which would shadow
/// the client method), the methods of `rpc_core::service::CallSite` (which every client type has)
/// and the server trait's provided methods.
const RESERVED_METHODS: &[&str] = &[
    "new",
    "with_outbox_shadow",
    "with_inline",
    "keep_port",
    "adopt_port",
    "take_kept",
    "exclusive",
    "with_outbox_mirror",
    "with_cursor",
    "restrict",
    "port_range",
    "set_cursor",
    "region",
    "lanes",
    "wait_policy",
    "inline",
    "process",
    "try_open",
    "may_open",
    "open",
    "owns",
    "flip_outbox",
    "search",
    "lock",
    "unlock",
    "dispatch",
    "dispatch_inline",
    "serve_one",
];

/// Checks the whole service; all misuse found is reported together.
pub fn check(service: &Service) -> syn::Result<()> {
    let mut errors = None;
    let generics = &service.input.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        combine(
            &mut errors,
            syn::Error::new(generics.span(), "a service enum cannot be generic"),
        );
    }
    if service.calls.is_empty() {
        combine(
            &mut errors,
            syn::Error::new(
                service.ident.span(),
                "a service needs at least one call: add a variant per call",
            ),
        );
    }
    let mut opcodes: HashMap<u32, &Call> = HashMap::new();
    let mut methods: HashMap<&str, &Call> = HashMap::new();
    for call in &service.calls {
        if let Err(e) = check_call(service, call) {
            combine(&mut errors, e);
        }
        if let Some(first) = opcodes.get(&call.opcode) {
            combine(
                &mut errors,
                syn::Error::new(
                    call.opcode_span,
                    format!(
                        "opcode {:#010x} of `{}` collides with `{}`; give one an explicit \
                         `#[rpc(opcode = N)]`",
                        call.opcode, call.ident, first.ident
                    ),
                ),
            );
        } else {
            opcodes.insert(call.opcode, call);
        }
        if let Some(first) = methods.get(call.method.as_str()) {
            combine(
                &mut errors,
                syn::Error::new(
                    call.ident.span(),
                    format!(
                        "`{}` and `{}` both become method `{}`; rename one",
                        first.ident, call.ident, call.method
                    ),
                ),
            );
        } else {
            methods.insert(&call.method, call);
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn check_call(service: &Service, call: &Call) -> syn::Result<()> {
    let name = call.ident;
    match call.fields {
        Fields::Unit => {}
        fields => {
            return Err(syn::Error::new(
                fields.span(),
                format!(
                    "call `{name}` has fields; a call is a unit variant that names its types in \
                     `#[rpc(request = T, response = U)]`"
                ),
            ))
        }
    }
    if RESERVED_METHODS.contains(&call.method.as_str()) {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "call `{name}` would become method `{}`, which `rpc_core::Process`, \
                 `rpc_core::service::CallSite` or the server trait already has; rename the variant",
                call.method
            ),
        ));
    }
    if syn::parse_str::<syn::Ident>(&call.method).is_err()
        && syn::parse_str::<syn::Ident>(&format!("r#{}", call.method)).is_err()
    {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "call `{name}` would become method `{}`, which is not a valid name",
                call.method
            ),
        ));
    }
    let Some(request) = &call.attrs.request else {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "call `{name}` has no request: add `#[rpc(request = T)]` (`request = ()` for none)"
            ),
        ));
    };
    check_type(&request.value, "request")?;
    match (&call.attrs.response, call.attrs.oneway) {
        (None, None) => {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "call `{name}` has no response: add `#[rpc(response = T)]` (`response = ()` \
                     to wait for completion) or mark it `oneway`"
                ),
            ))
        }
        (Some(response), Some(_)) => {
            return Err(syn::Error::new(
                response.span,
                format!("call `{name}` is `oneway` and so has no response"),
            ))
        }
        (Some(response), None) => check_type(&response.value, "response")?,
        (None, Some(_)) => {}
    }
    if let Some(limit) = &call.attrs.limit {
        if !call.request().is_some_and(|r| r.is_stream()) {
            return Err(syn::Error::new(
                limit.span,
                format!(
                    "`limit` bounds a streamed request, and `{name}`'s request is not streamed"
                ),
            ));
        }
    }
    if call.opcode >= RESERVED_OPCODES {
        return Err(syn::Error::new(
            call.opcode_span,
            format!(
                "opcode {:#010x} of `{name}` is reserved for the protocol (0xffffff00 and up)",
                call.opcode
            ),
        ));
    }
    if service.class.is_some() && call.attrs.opcode.is_none() && call.index > 0xFFFF {
        return Err(syn::Error::new(
            name.span(),
            "a class numbers at most 65536 calls",
        ));
    }
    Ok(())
}

fn check_type(ty: &Type, what: &str) -> syn::Result<()> {
    let bad = |msg: &str| Err(syn::Error::new(ty.span(), format!("{what} type: {msg}")));
    match Wire::of(ty) {
        Wire::Unit | Wire::Bytes | Wire::Text => Ok(()),
        Wire::Fixed(Type::Reference(_) | Type::Ptr(_)) => bad(
            "references and pointers cannot cross to the other side; use `[u8]` or `str` to \
             stream bytes or text, or a zerocopy value",
        ),
        Wire::Fixed(Type::Slice(_)) => bad("only `[u8]` (bytes) and `str` (text) can be streamed"),
        Wire::Fixed(
            Type::ImplTrait(_) | Type::TraitObject(_) | Type::Infer(_) | Type::Never(_),
        ) => bad("must be a zerocopy type, `[u8]`, `str` or `()`"),
        Wire::Fixed(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::RESERVED_METHODS;

    /// Every public method of `rpc_core::Process` is reserved: the list is written by hand, so a
    /// method added there without it would silently shadow a generated call of that name.
    #[test]
    fn every_public_method_of_process_is_reserved() {
        let source = include_str!("../../rpc-core/src/process.rs");
        let process = &source[source
            .find("pub struct Process<")
            .expect("rpc-core defines Process")..];
        let missing: Vec<&str> = process
            .lines()
            .filter_map(|line| {
                let line = line.trim_start();
                let rest = line
                    .strip_prefix("pub fn ")
                    .or_else(|| line.strip_prefix("pub unsafe fn "))?;
                rest.split(['(', '<']).next()
            })
            .filter(|name| !RESERVED_METHODS.contains(name))
            .collect();
        assert!(missing.is_empty(), "not in RESERVED_METHODS: {missing:?}");
    }
}

//! Checks on the model: everything the derive can reject before generating code. Type sizes and
//! zerocopy traits are not known to a macro; `expand` emits compile-time assertions for those,
//! spanned at the user's type.

use std::collections::HashMap;

use syn::spanned::Spanned;
use syn::Type;

use crate::ast::{combine, Call, Service, Wire};

/// Opcodes from here up belong to the protocol (`ferry_rpc::service::RESERVED_OPCODES`).
const RESERVED_OPCODES: u32 = 0xFFFF_FF00;

/// Method names a call cannot take: the generated client's own method. (The server trait has
/// only the handlers; dispatch lives on the service enum, whose other items are not methods of
/// either.)
const RESERVED_METHODS: &[&str] = &["with_deadline"];

/// Methods of the prelude's traits that take their receiver by value, which method-call syntax
/// finds before a client's own method of that name (taken by reference), with their traits'.
const BY_VALUE_METHODS: &[(&str, &str)] =
    &[("into", "Into::into"), ("try_into", "TryInto::try_into")];

/// The client's methods a call becomes: its own, `<method>_into` for a streamed reply, and
/// `<method>_with` for a `Bytes` argument with a fixed reply (or none), as `expand` makes them.
fn client_methods(call: &Call) -> Vec<String> {
    let mut out = vec![call.method.clone()];
    if call.streams_reply() {
        out.push(format!("{}_into", call.method));
    }
    if call.fills_in_place() {
        out.push(format!("{}_with", call.method));
    }
    out
}

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
    let mut methods: HashMap<String, &Call> = HashMap::new();
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
        for method in client_methods(call) {
            if let Some(first) = methods.get(method.as_str()) {
                combine(
                    &mut errors,
                    syn::Error::new(
                        call.ident.span(),
                        format!(
                            "`{}` and `{}` both become the client's method `{method}`; rename \
                             one",
                            first.ident, call.ident
                        ),
                    ),
                );
            } else {
                methods.insert(method, call);
            }
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn check_call(service: &Service, call: &Call) -> syn::Result<()> {
    let name = call.ident;
    let mut errors = None;
    if let Some(request) = &call.attrs.request {
        combine(
            &mut errors,
            syn::Error::new(
                request.span,
                format!(
                    "`request = T` is gone: a call's arguments are its variant's fields \
                     (`{name} {{ n: u64 }}`; `Bytes` or `Text` last for data of any length)"
                ),
            ),
        );
    }
    if let Some((method, path)) = BY_VALUE_METHODS.iter().find(|(m, _)| *m == call.method) {
        combine(
            &mut errors,
            syn::Error::new(
                name.span(),
                format!(
                    "call `{name}` would become method `{method}`, which every client already has \
                     by value (`{path}`): `client.{method}(..)` would call that one; rename the \
                     variant"
                ),
            ),
        );
    }
    if RESERVED_METHODS.contains(&call.method.as_str()) {
        combine(
            &mut errors,
            syn::Error::new(
                name.span(),
                format!(
                    "call `{name}` would become method `{}`, which the generated client already \
                     has; rename the variant",
                    call.method
                ),
            ),
        );
    }
    if syn::parse_str::<syn::Ident>(&call.method).is_err()
        && syn::parse_str::<syn::Ident>(&format!("r#{}", call.method)).is_err()
    {
        combine(
            &mut errors,
            syn::Error::new(
                name.span(),
                format!(
                    "call `{name}` would become method `{}`, a Rust keyword that cannot be a \
                     method name; rename the variant",
                    call.method
                ),
            ),
        );
    }
    let streams: Vec<_> = call.args.iter().filter(|a| a.wire.is_stream()).collect();
    if let [first, second, ..] = streams[..] {
        combine(
            &mut errors,
            syn::Error::new_spanned(
                second.ty,
                format!(
                    "call `{name}` streams two arguments, `{}` and `{}`: a call streams at most \
                     one (`Bytes` or `Text`), as its last field",
                    first.ident, second.ident
                ),
            ),
        );
    } else if let [stream] = streams[..] {
        if call.stream_arg().is_none() {
            combine(
                &mut errors,
                syn::Error::new_spanned(
                    stream.ty,
                    format!(
                        "the streamed argument `{}` of call `{name}` must be its last field",
                        stream.ident
                    ),
                ),
            );
        }
    }
    for arg in &call.args {
        if !arg.wire.is_stream() {
            if let Err(e) = check_type(arg.ty, What::Argument) {
                combine(&mut errors, e);
            }
        }
        if arg.ident.to_string().starts_with("__rpc") {
            combine(
                &mut errors,
                syn::Error::new(
                    arg.ident.span(),
                    "names starting with `__rpc` are the derive's own",
                ),
            );
        }
    }
    if call.oneway() {
        for (what, set) in [
            ("a `response`", call.attrs.response.as_ref().map(|r| r.span)),
            ("an `error` type", call.attrs.error.as_ref().map(|e| e.span)),
        ] {
            if let Some(span) = set {
                combine(
                    &mut errors,
                    syn::Error::new(
                        span,
                        format!(
                            "call `{name}` is `oneway`: the client does not wait for a reply, so \
                             it cannot have {what}"
                        ),
                    ),
                );
            }
        }
    }
    if let Some(response) = &call.attrs.response {
        if let Err(e) = check_type(&response.value, What::Response) {
            combine(&mut errors, e);
        }
    }
    if let Some(error) = &call.attrs.error {
        match Wire::of(&error.value) {
            Wire::Fixed(ty) => {
                if let Err(e) = check_type(ty, What::Error) {
                    combine(&mut errors, e);
                }
            }
            _ => combine(
                &mut errors,
                syn::Error::new_spanned(
                    &error.value,
                    "an error type crosses as a fixed value (a zerocopy type such as a \
                     `#[repr(u8)]` enum), not `()`, `Bytes` or `Text`",
                ),
            ),
        }
    }
    if let Some(span) = call.attrs.values {
        let why = if call.oneway() {
            Some("is `oneway` (it waits for no reply, so it has no fences to leave out)")
        } else if call.stream_arg().is_some() || call.streams_reply() {
            Some("streams bytes through memory (the fences order them)")
        } else {
            None
        };
        if let Some(why) = why {
            combine(
                &mut errors,
                syn::Error::new(
                    span,
                    format!(
                        "`values` is for a call whose fixed arguments and reply are all it \
                         passes, and call `{name}` {why}"
                    ),
                ),
            );
        }
    }
    if let Some(span) = call.attrs.hot {
        if call.stream_arg().is_some() || call.streams_reply() {
            combine(
                &mut errors,
                syn::Error::new(
                    span,
                    format!(
                        "`hot` is for a call whose fixed arguments and reply are all it passes, \
                         and call `{name}` streams bytes (a stream's code is shared by every \
                         call that streams)"
                    ),
                ),
            );
        }
    }
    if let Some(limit) = &call.attrs.limit {
        if call.stream_arg().is_none() && !call.streams_reply() {
            combine(
                &mut errors,
                syn::Error::new(
                    limit.span,
                    format!(
                        "`limit` bounds a stream, and call `{name}` streams neither an argument \
                         nor its reply"
                    ),
                ),
            );
        }
    }
    if call.opcode >= RESERVED_OPCODES {
        combine(
            &mut errors,
            syn::Error::new(
                call.opcode_span,
                format!(
                    "opcode {:#010x} of `{name}` is reserved for the protocol (0xffffff00 and up)",
                    call.opcode
                ),
            ),
        );
    }
    if service.class.is_some() && call.attrs.opcode.is_none() && call.index > 0xFFFF {
        combine(
            &mut errors,
            syn::Error::new(name.span(), "a class numbers at most 65536 calls"),
        );
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Where a type is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Argument,
    Response,
    Error,
}

/// A type written as an argument, a response or an error: what a macro can tell from its
/// tokens (that it is zerocopy and fits is asserted in the generated code). Errors span the part
/// of the type that cannot cross.
fn check_type(ty: &Type, what: What) -> syn::Result<()> {
    let (label, instead) = match what {
        What::Argument => (
            "argument",
            "; use `Bytes` or `Text` (as the last field) for data of any length",
        ),
        What::Response => ("response", "; use `Bytes` or `Text` for data of any length"),
        What::Error => (
            "error",
            "; an error is a fixed value, such as a `#[repr(u8)]` enum",
        ),
    };
    let ty = match Wire::of(ty) {
        Wire::Unit | Wire::Bytes | Wire::Text => return Ok(()),
        Wire::Fixed(ty) => ty,
    };
    if let Some(stranded) = stranded(ty) {
        let why = &stranded.why;
        let msg = match (what, stranded.stream) {
            (What::Argument, Some(stream)) => format!(
                "{why}; write `{stream}` (the client passes, and the handler gets, a `&{}`; at \
                 most the call's `limit`, 64 KiB unless set), as the last field",
                stream.slice()
            ),
            (What::Response, Some(stream)) => format!(
                "{why}; write `{stream}` (the handler returns `impl AsRef<{}>`)",
                stream.slice()
            ),
            _ => format!("{why}{instead}"),
        };
        return Err(syn::Error::new_spanned(
            stranded.ty,
            format!("{label} type: {msg}"),
        ));
    }
    match ty {
        Type::ImplTrait(_)
        | Type::TraitObject(_)
        | Type::Infer(_)
        | Type::Never(_)
        | Type::BareFn(_)
        | Type::Macro(_)
        | Type::Verbatim(_) => Err(syn::Error::new_spanned(
            ty,
            format!("{label} type: must be a zerocopy value, `Bytes`, `Text` or `()`{instead}"),
        )),
        _ => Ok(()),
    }
}

/// A stream that carries data of any length: what to write instead of a type that cannot cross.
#[derive(Clone, Copy)]
pub enum Stream {
    Bytes,
    Text,
}

impl Stream {
    /// What a side passes or gets for it: `[u8]` or `str`.
    pub fn slice(self) -> &'static str {
        match self {
            Stream::Bytes => "[u8]",
            Stream::Text => "str",
        }
    }
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stream::Bytes => "Bytes",
            Stream::Text => "Text",
        })
    }
}

/// A type, or the part of one, whose bytes are not its value: it points into the memory of the
/// side that holds it, or has no fixed size.
pub struct Stranded<'a> {
    /// The part that cannot cross: the whole type, or an array's element, a tuple's member.
    pub ty: &'a Type,
    /// Why, as the start of a sentence.
    pub why: String,
    /// The stream that carries the same data, where one does (`Text` for a `String` or a `&str`,
    /// `Bytes` for a `Vec<u8>` or a `&[u8]`).
    pub stream: Option<Stream>,
}

/// What in `ty` cannot cross by value, if anything: references, pointers, slices, `str`,
/// `String`, `Vec` and the smart pointers (`Box`, `Rc`, `Arc`), alone or inside an array or a
/// tuple. Read from the tokens, so a type of the user's own with one of these names is taken for
/// it: such a type still cannot cross.
pub fn stranded(ty: &Type) -> Option<Stranded<'_>> {
    let found = |why: &str, stream| {
        Some(Stranded {
            ty,
            why: why.to_string(),
            stream,
        })
    };
    match ty {
        Type::Paren(p) => stranded(&p.elem),
        Type::Group(g) => stranded(&g.elem),
        Type::Array(a) => stranded(&a.elem),
        Type::Tuple(t) => t.elems.iter().find_map(stranded),
        Type::Reference(r) => found(
            "references cannot cross to the other side",
            stream_of(&r.elem),
        ),
        Type::Ptr(_) => found("pointers cannot cross to the other side", None),
        Type::Slice(_) => found("slices cannot cross by value", stream_of(ty)),
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            let inner = match &last.arguments {
                syn::PathArguments::AngleBracketed(a) => match a.args.first() {
                    Some(syn::GenericArgument::Type(t)) => Some(t),
                    _ => None,
                },
                _ => None,
            };
            let written = quote::quote!(#ty).to_string().replace(' ', "");
            match (name.as_str(), inner) {
                ("str", None) if p.path.segments.len() == 1 => {
                    found("`str` cannot cross by value", Some(Stream::Text))
                }
                ("String", None) => found(
                    &format!(
                        "`{written}` cannot cross by value: its bytes are in this side's heap"
                    ),
                    Some(Stream::Text),
                ),
                ("Vec", Some(elem)) => found(
                    &format!(
                        "`{written}` cannot cross by value: its items are in this side's heap"
                    ),
                    is_u8(elem).then_some(Stream::Bytes),
                ),
                ("Box" | "Rc" | "Arc", Some(elem)) => found(
                    &format!(
                        "`{written}` cannot cross to the other side: it points into this side's \
                         heap"
                    ),
                    stream_of(elem),
                ),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The stream for data a reference or a box points to: `Text` for `str`, `Bytes` for `[u8]`.
fn stream_of(elem: &Type) -> Option<Stream> {
    match elem {
        Type::Path(p) if p.qself.is_none() && p.path.is_ident("str") => Some(Stream::Text),
        Type::Slice(s) if is_u8(&s.elem) => Some(Stream::Bytes),
        _ => None,
    }
}

fn is_u8(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("u8"))
}

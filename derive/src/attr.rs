//! Parsing `#[rpc(...)]` attributes into raw, spanned settings; nothing is checked here beyond
//! the syntax of each key (that is `valid`'s job).

use proc_macro2::Span;
use syn::{Attribute, Expr, LitInt, LitStr, Type};

/// A setting and where it was written.
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// `#[rpc(...)]` on the enum.
#[derive(Default)]
pub struct ServiceAttrs {
    /// `service = "name"`: the name hashed into opcodes and the fingerprint.
    pub service: Option<Spanned<String>>,
    /// `class = N`: number calls `N << 16 | index` instead of hashing.
    pub class: Option<Spanned<u16>>,
}

/// `#[rpc(...)]` on a variant.
#[derive(Default)]
pub struct CallAttrs {
    /// `request = Type`: no longer a setting (the variant's fields are the arguments); kept to
    /// say so.
    pub request: Option<Spanned<Type>>,
    /// `response = Type` (`Bytes` and `Text` mean a stream).
    pub response: Option<Spanned<Type>>,
    /// `error = Type`: the handler returns `Result<_, Type>`.
    pub error: Option<Spanned<Type>>,
    /// `oneway`: no response; the client does not wait.
    pub oneway: Option<Span>,
    /// `opcode = N`.
    pub opcode: Option<Spanned<u32>>,
    /// `limit = EXPR`: the most bytes a lane may stream, either way (any `u64` const
    /// expression).
    pub limit: Option<Spanned<Expr>>,
    /// `values`: the call passes values only; its handler touches none of the caller's memory.
    pub values: Option<Span>,
    /// `hot`: on a GPU the client's call is compiled where it is written, not shared.
    pub hot: Option<Span>,
}

fn set<T>(slot: &mut Option<Spanned<T>>, value: T, span: Span, key: &str) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(span, format!("duplicate `{key}`")));
    }
    *slot = Some(Spanned { value, span });
    Ok(())
}

fn int<T: std::str::FromStr>(lit: &LitInt, what: &str) -> syn::Result<T>
where
    T::Err: std::fmt::Display,
{
    lit.base10_parse::<T>()
        .map_err(|_| syn::Error::new(lit.span(), format!("{what} out of range")))
}

/// The longest service name, in bytes, as `ferry_rpc::service::SERVICE_NAME_BYTES` (the
/// generated code also asserts `ferry_rpc::service::name_fits` of the name).
const SERVICE_NAME_BYTES: usize = 48;

/// Reads every `#[rpc(...)]` among `attrs` on the enum.
pub fn service(attrs: &[Attribute]) -> syn::Result<ServiceAttrs> {
    let mut out = ServiceAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("rpc")) {
        attr.parse_nested_meta(|meta| {
            let span = meta.path.span_of_ident();
            if meta.path.is_ident("service") {
                let lit: LitStr = meta.value()?.parse()?;
                let name = lit.value();
                let why = if name.is_empty() {
                    Some("is empty".to_string())
                } else if name.len() > SERVICE_NAME_BYTES {
                    Some(format!(
                        "is {} bytes, more than the {SERVICE_NAME_BYTES} that transports' tables \
                         of served services hold: give a shorter one",
                        name.len()
                    ))
                } else if name.contains('\0') {
                    Some("has a NUL byte, which transports' tables of served services end names \
                          with"
                        .to_string())
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(syn::Error::new(
                        lit.span(),
                        format!("service name {:?} {why}", name),
                    ));
                }
                set(&mut out.service, name, lit.span(), "service")
            } else if meta.path.is_ident("class") {
                let lit: LitInt = meta.value()?.parse()?;
                let class: u16 = int(&lit, "`class`")?;
                if class >= 0x8000 {
                    return Err(syn::Error::new(
                        lit.span(),
                        "`class` must be below 0x8000 (opcodes with the top bit set are hashes)",
                    ));
                }
                set(&mut out.class, class, lit.span(), "class")
            } else if meta.path.is_ident("crate") {
                // Read by `krate::path`, which checks it.
                let _: LitStr = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(syn::Error::new(
                    span,
                    "unknown service setting; expected `service = \"name\"`, `class = N` or `crate = \"path\"`",
                ))
            }
        })?;
    }
    Ok(out)
}

/// Reads every `#[rpc(...)]` among `attrs` on a variant.
pub fn call(attrs: &[Attribute]) -> syn::Result<CallAttrs> {
    let mut out = CallAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("rpc")) {
        attr.parse_nested_meta(|meta| {
            let span = meta.path.span_of_ident();
            if meta.path.is_ident("request") {
                let ty: Type = meta.value()?.parse()?;
                set(&mut out.request, ty, span, "request")
            } else if meta.path.is_ident("response") {
                let ty: Type = meta.value()?.parse()?;
                set(&mut out.response, ty, span, "response")
            } else if meta.path.is_ident("error") {
                let ty: Type = meta.value()?.parse()?;
                let span = syn::spanned::Spanned::span(&ty);
                set(&mut out.error, ty, span, "error")
            } else if meta.path.is_ident("oneway") {
                no_value(&meta, "oneway")?;
                if out.oneway.is_some() {
                    return Err(syn::Error::new(span, "duplicate `oneway`"));
                }
                out.oneway = Some(span);
                Ok(())
            } else if meta.path.is_ident("values") {
                no_value(&meta, "values")?;
                if out.values.is_some() {
                    return Err(syn::Error::new(span, "duplicate `values`"));
                }
                out.values = Some(span);
                Ok(())
            } else if meta.path.is_ident("hot") {
                no_value(&meta, "hot")?;
                if out.hot.is_some() {
                    return Err(syn::Error::new(span, "duplicate `hot`"));
                }
                out.hot = Some(span);
                Ok(())
            } else if meta.path.is_ident("opcode") {
                let lit: LitInt = meta.value()?.parse()?;
                let opcode = int(&lit, "`opcode` (a u32)")?;
                set(&mut out.opcode, opcode, lit.span(), "opcode")
            } else if meta.path.is_ident("limit") {
                let expr: Expr = meta.value()?.parse()?;
                let span = syn::spanned::Spanned::span(&expr);
                set(&mut out.limit, expr, span, "limit")
            } else {
                Err(syn::Error::new(
                    span,
                    "unknown call setting; expected `response = T`, `error = E`, `oneway`, \
                     `values`, `hot`, `opcode = N` or `limit = N`",
                ))
            }
        })?;
    }
    Ok(out)
}

/// A flag (`oneway`, `values`, `hot`) given a value, `oneway = true` say: an error that says how
/// to write it (the parser's own would be "expected `,`").
fn no_value(meta: &syn::meta::ParseNestedMeta<'_>, name: &str) -> syn::Result<()> {
    if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
        return Ok(());
    }
    Err(syn::Error::new(
        meta.path.span_of_ident(),
        format!("`{name}` takes no value: write `#[rpc({name})]`, or leave it out"),
    ))
}

/// The span of a path's single identifier (or the whole path).
trait SpanOfIdent {
    fn span_of_ident(&self) -> Span;
}

impl SpanOfIdent for syn::Path {
    fn span_of_ident(&self) -> Span {
        self.get_ident()
            .map_or_else(|| syn::spanned::Spanned::span(self), |i| i.span())
    }
}

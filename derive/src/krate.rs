//! Where the generated code finds the service runtime: the path that stands for `ferry_rpc` in
//! the user's crate.
//!
//! A user depends on one ferry crate for their use (`ferry-shm` between processes, `ferry-device`
//! in GPU code, `ferry-gpu` in a GPU host program, or `ferry-rpc` itself), and each of those
//! re-exports `ferry_rpc`. The macros look in the user's `Cargo.toml` (through
//! `proc-macro-crate`, which follows renames and workspace inheritance) for the first of them they
//! find, in that order, and `#[rpc(crate = "path")]` on the enum (`#[schema(crate = "path")]` on a
//! type deriving `Schema`, `#[wire(crate = "path")]`) names the path outright (for a crate that
//! re-exports ferry under another name).
//!
//! Code is generated against `::ferry_rpc` and the path is substituted afterwards, so every
//! generated item names the runtime the same way.

use proc_macro2::{Group, Spacing, TokenStream, TokenTree};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{format_ident, quote};
use syn::{Attribute, LitStr};

/// The packages that re-export the runtime, and the path to it inside each.
const FACADES: [(&str, Option<&str>); 4] = [
    ("ferry-rpc", None),
    ("ferry-shm", Some("ferry_rpc")),
    ("ferry-device", Some("ferry_rpc")),
    ("ferry-gpu", Some("ferry_rpc")),
];

/// The path to the runtime for the crate being compiled: `#[ATTR(crate = "...")]` if written
/// (`attr` is `rpc` for `RpcOpcodes`, `schema` for `Schema`), else the first ferry crate among its
/// dependencies. `derive` names the derive in the error.
pub fn path(attrs: &[Attribute], attr: &str, derive: &str) -> syn::Result<TokenStream> {
    match written(attrs, attr)? {
        Some(path) => Ok(path),
        None => found(&format!("#[derive({derive})]"), attr),
    }
}

/// The path to the runtime through the first ferry crate among the dependencies of the crate
/// being compiled. `used` names the macro in the error (`#[derive(Schema)]`, `#[wire]`), `attr`
/// the attribute whose `crate = "..."` names the path outright.
pub fn found(used: &str, attr: &str) -> syn::Result<TokenStream> {
    for (package, inner) in FACADES {
        let Ok(found) = crate_name(package) else {
            continue;
        };
        // A crate compiling itself (ferry-rpc's own tests and doctests reach it by name too:
        // it declares `extern crate self as ferry_rpc`).
        let root = match found {
            FoundCrate::Itself => format_ident!("{}", package.replace('-', "_")),
            FoundCrate::Name(name) => format_ident!("{}", name),
        };
        return Ok(match inner {
            None => quote!(::#root),
            Some(inner) => {
                let inner = format_ident!("{}", inner);
                quote!(::#root::#inner)
            }
        });
    }
    Err(syn::Error::new(
        proc_macro2::Span::call_site(),
        format!(
            "{used} found no ferry crate among this crate's dependencies: add \
             `ferry-shm` (between processes), `ferry-device` (GPU code), `ferry-gpu` (a GPU host \
             program) or `ferry-rpc`, or name the path with \
             `#[{attr}(crate = \"path::to::ferry_rpc\")]`"
        ),
    ))
}

/// The path of `#[ATTR(crate = "...")]`, if written. Other keys are read (and checked) elsewhere.
fn written(attrs: &[Attribute], name: &str) -> syn::Result<Option<TokenStream>> {
    let mut out = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(name)) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: LitStr = meta.value()?.parse()?;
                let path: syn::Path = lit.parse()?;
                out = Some(quote!(#path));
            } else if meta.input.peek(syn::Token![=]) {
                // Skip the value of any other key.
                let _: syn::Expr = meta.value()?.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// One of ferry's derives on `input`: parses it, finds the runtime's path (`#[ATTR(crate)]`,
/// else the dependencies), generates with `expand` and puts the path in; on a misuse (of the
/// input or of the path) the errors, together, plus `fallback`'s stand-ins for what would have
/// been generated.
pub fn derive(
    input: TokenStream,
    attr: &str,
    derive: &str,
    expand: fn(&syn::DeriveInput) -> syn::Result<TokenStream>,
    fallback: fn(&syn::DeriveInput, syn::Error) -> TokenStream,
) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let (path, error) = match self::path(&input.attrs, attr, derive) {
        Ok(path) => (path, None),
        Err(e) => (quote!(::ferry_rpc), Some(e)),
    };
    let tokens = match (expand(&input), error) {
        (Ok(tokens), None) => tokens,
        (Ok(_), Some(e)) => fallback(&input, e),
        (Err(mut e), Some(more)) => {
            e.combine(more);
            fallback(&input, e)
        }
        (Err(e), None) => fallback(&input, e),
    };
    substitute(tokens, &path)
}

/// `tokens` with every `::ferry_rpc` replaced by `path` (spanned as what it replaces).
pub fn substitute(tokens: TokenStream, path: &TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < trees.len() {
        let at_path = matches!(
            (&trees[i], trees.get(i + 1), trees.get(i + 2)),
            (TokenTree::Punct(a), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(id)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint
                    && b.as_char() == ':' && id == "ferry_rpc"
        );
        if at_path {
            // At the replaced path's place in the source: an error spanned there (a call's
            // slot check) still points where the generated code says.
            let span = trees[i].span();
            out.extend(path.clone().into_iter().map(|mut t| {
                t.set_span(span);
                t
            }));
            i += 3;
            continue;
        }
        match &trees[i] {
            TokenTree::Group(g) => {
                let mut inner = Group::new(g.delimiter(), substitute(g.stream(), path));
                inner.set_span(g.span());
                out.extend([TokenTree::Group(inner)]);
            }
            other => out.extend([other.clone()]),
        }
        i += 1;
    }
    out
}

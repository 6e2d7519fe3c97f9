//! Code generation from a checked model. Everything generated names only `core` and `rpc_core`
//! (zerocopy through `rpc_core::__private`), so `no_std` crates can derive services.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use crate::ast::{Call, Service, Wire};
use crate::{fallback, valid};

/// The derive: parse → model → check → generate; on misuse, the errors plus the fallback.
pub fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    match expand(&input) {
        Ok(tokens) => tokens,
        Err(e) => fallback::expand(&input, e),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let service = Service::from_syn(input)?;
    valid::check(&service)?;
    Ok(generate(&service))
}

/// The generated method's name (a raw identifier where the name is a keyword).
fn method_ident(call: &Call) -> Ident {
    if syn::parse_str::<Ident>(&call.method).is_ok() {
        Ident::new(&call.method, call.ident.span())
    } else {
        Ident::new_raw(&call.method, call.ident.span())
    }
}

fn opcode_lit(call: &Call) -> TokenStream {
    let lit = syn::LitInt::new(&format!("{:#010x}u32", call.opcode), Span::call_site());
    quote!(#lit)
}

fn shape(wire: Option<Wire>) -> TokenStream {
    match wire {
        None => quote!(::rpc_core::service::Shape::None),
        Some(Wire::Unit) => quote!(::rpc_core::service::Shape::of::<()>()),
        Some(Wire::Fixed(ty)) => quote!(::rpc_core::service::Shape::of::<#ty>()),
        Some(Wire::Bytes) => quote!(::rpc_core::service::Shape::Bytes),
        Some(Wire::Text) => quote!(::rpc_core::service::Shape::Text),
    }
}

fn generate(service: &Service) -> TokenStream {
    let ident = service.ident;
    let vis = service.vis;
    let name = &service.name;
    let client = format_ident!("{}Client", ident);
    let server = format_ident!("{}Server", ident);

    let variants: Vec<&Ident> = service.calls.iter().map(|c| c.ident).collect();
    let opcodes: Vec<TokenStream> = service.calls.iter().map(opcode_lit).collect();
    let call_names: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
    let requests: Vec<TokenStream> = service.calls.iter().map(|c| shape(c.request())).collect();
    let responses: Vec<TokenStream> = service.calls.iter().map(|c| shape(c.response())).collect();

    let asserts = assertions(service);
    // Every call is reachable through `from_opcode` and dispatch; say so to dead-code analysis.
    let used = quote! {
        #( let _ = ::core::mem::ManuallyDrop::new(#ident::#variants); )*
    };
    let client_sigs: Vec<TokenStream> = service.calls.iter().map(client_sig).collect();
    let client_bodies: Vec<TokenStream> = service.calls.iter().map(client_body).collect();
    let client_docs: Vec<TokenStream> = service.calls.iter().map(|c| docs(c, "Calls")).collect();
    let handler_sigs: Vec<TokenStream> = service.calls.iter().map(handler_sig).collect();
    let handler_docs: Vec<TokenStream> = service.calls.iter().map(|c| docs(c, "Serves")).collect();
    let arms: Vec<TokenStream> = service
        .calls
        .iter()
        .map(|c| dispatch_arm(c, &server))
        .collect();
    let inline_arms: Vec<TokenStream> = service
        .calls
        .iter()
        .map(|c| inline_arm(c, &server))
        .collect();

    let client_doc = format!(
        "The client side of service `{name}`: one method per call of [`{ident}`], for every \
         client `rpc_core::Process` (and every other `rpc_core::service::CallSite`).\n\nEvery \
         active lane calls a method together with the \
         others (on a GPU: convergently), each with its own request, and gets its own response. \
         A method opens a port with the call's opcode, sends, and (unless the call is one-way) \
         waits for the reply under the process's wait policy; a server that does not know the \
         call answers with an error instead of leaving the caller waiting."
    );
    let server_doc = format!(
        "The server side of service `{name}`: one handler per call of [`{ident}`], and \
         [`dispatch`]({server}::dispatch) to serve one call.\n\nA handler runs once for each \
         active lane of the call, in lane order, on the server thread that opened the port \
         (a host server handles every lane of a GPU warp's call). Handlers take `&self`, so \
         several server threads may share one service."
    );

    quote! {
        const _: () = { #asserts #used };

        impl #ident {
            /// This call's opcode.
            pub const fn opcode(&self) -> u32 {
                match self {
                    #( Self::#variants => #opcodes, )*
                }
            }

            /// The call with this opcode, if the service has one.
            pub const fn from_opcode(opcode: u32) -> ::core::option::Option<Self> {
                match opcode {
                    #( #opcodes => ::core::option::Option::Some(Self::#variants), )*
                    _ => ::core::option::Option::None,
                }
            }

            /// The schema fingerprint (`rpc_core::service::Service::FINGERPRINT`).
            pub const FINGERPRINT: u64 = <Self as ::rpc_core::service::Service>::FINGERPRINT;
        }

        impl ::rpc_core::service::Service for #ident {
            const NAME: &'static str = #name;
            const FINGERPRINT: u64 = ::rpc_core::service::Fingerprint::new(#name)
                #( .call(#call_names, #opcodes, #requests, #responses) )*
                .finish();
            const OPCODES: &'static [u32] = &[ #( #opcodes ),* ];
        }

        #[doc = #client_doc]
        #vis trait #client {
            #( #client_docs #client_sigs; )*
        }

        impl<__RpcC> #client for __RpcC
        where
            __RpcC: ::rpc_core::service::CallSite + ?::core::marker::Sized,
        {
            #( #client_sigs { #client_bodies } )*
        }

        #[doc = #server_doc]
        #vis trait #server {
            #( #handler_docs #handler_sigs; )*

            /// Serves the call on `port`, a port this server just opened: reads the opcode,
            /// decodes each lane's request, calls the handler once per lane, and replies. A call
            /// the service does not have gets `status::UNKNOWN_OPCODE` back; a request stream
            /// longer than the call's `limit` (or than `buffers` take) gets `status::REJECTED`;
            /// the handshake opcode is answered with this service's fingerprint. `buffers`
            /// receives streamed requests (`Vec::new()` with `alloc`).
            ///
            /// Returns what was served, or the protocol error (the client stalled).
            fn dispatch<__RpcL, __RpcM, __RpcW, __RpcB>(
                &self,
                port: &mut ::rpc_core::Port<'_, '_, ::rpc_core::Server, __RpcL, __RpcM, __RpcW>,
                buffers: &mut __RpcB,
            ) -> ::core::result::Result<::rpc_core::service::Served, ::rpc_core::Error>
            where
                __RpcL: ::rpc_core::Lanes,
                __RpcM: ::rpc_core::Mailbox,
                __RpcW: ::rpc_core::Wait,
                __RpcB: ::rpc_core::service::LaneBuffers,
            {
                let _ = &buffers;
                match port.opcode() {
                    #( #arms )*
                    ::rpc_core::service::HANDSHAKE => ::rpc_core::__private::serve_handshake(
                        port,
                        <#ident as ::rpc_core::service::Service>::FINGERPRINT,
                    ),
                    _ => ::rpc_core::__private::reply_unknown(port),
                }
            }

            /// Serves a call that came through a transport's inline path
            /// (`rpc_core::service::InlineCall`) rather than a port: decodes `request`, calls the
            /// handler, writes its reply at the start of `reply` and returns the status to send
            /// back with the reply's length in bytes (`status::BAD_REQUEST` for a request of the
            /// wrong size, `status::UNKNOWN_OPCODE` for a call the service does not have, both
            /// with no reply bytes). `None` for a call
            /// that cannot travel inline (a stream, a one-way call, a type over
            /// `INLINE_BYTES`): the transport tells the client to use a port.
            fn dispatch_inline(
                &self,
                opcode: u32,
                request: &[u8],
                reply: &mut [u8; ::rpc_core::service::INLINE_BYTES],
            ) -> ::core::option::Option<(u32, usize)> {
                let _ = (&request, &reply);
                match opcode {
                    #( #inline_arms )*
                    ::rpc_core::service::HANDSHAKE => ::core::option::Option::None,
                    _ => ::core::option::Option::Some((
                        ::rpc_core::service::status::UNKNOWN_OPCODE,
                        0,
                    )),
                }
            }

            /// Serves one call if a client is waiting: opens a port, [`dispatch`](Self::dispatch)es
            /// it and closes it. `Ok(None)` when no call was pending.
            fn serve_one<__RpcL, __RpcM, __RpcW, __RpcB>(
                &self,
                server: &::rpc_core::Process<'_, ::rpc_core::Server, __RpcL, __RpcM, __RpcW>,
                buffers: &mut __RpcB,
            ) -> ::core::result::Result<
                ::core::option::Option<::rpc_core::service::Served>,
                ::rpc_core::Error,
            >
            where
                __RpcL: ::rpc_core::Lanes,
                __RpcM: ::rpc_core::Mailbox,
                __RpcW: ::rpc_core::Wait,
                __RpcB: ::rpc_core::service::LaneBuffers,
            {
                match server.try_open(()) {
                    ::core::option::Option::Some(mut port) => {
                        <Self as #server>::dispatch(self, &mut port, buffers)
                            .map(::core::option::Option::Some)
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Ok(::core::option::Option::None)
                    }
                }
            }
        }
    }
}

/// Compile-time checks the macro cannot make itself, each spanned at the user's type: the type
/// is zerocopy, and fits in one slot.
fn assertions(service: &Service) -> TokenStream {
    let mut wire = Vec::new();
    let mut sizes = Vec::new();
    for call in &service.calls {
        for (what, wire_ty) in [("request", call.request()), ("response", call.response())] {
            let Some(Wire::Fixed(ty)) = wire_ty else {
                continue;
            };
            let span = ty.span();
            wire.push(quote_spanned! {span=> __rpc_assert_wire::<#ty>(); });
            let message = format!(
                "the {what} type of call `{}` is larger than a 64-byte slot: make it smaller, or \
                 stream it (`{what} = [u8]`)",
                call.ident
            );
            sizes.push(quote_spanned! {span=>
                ::core::assert!(
                    ::core::mem::size_of::<#ty>() <= ::rpc_core::layout::SLOT_BYTES,
                    #message
                );
            });
        }
    }
    quote! {
        #[allow(dead_code)]
        fn __rpc_assert_wire<T>()
        where
            T: ?Sized
                + ::rpc_core::__private::zerocopy::IntoBytes
                + ::rpc_core::__private::zerocopy::FromBytes
                + ::rpc_core::__private::zerocopy::Immutable
                + ::rpc_core::__private::zerocopy::KnownLayout,
        {
        }
        #[allow(dead_code)]
        fn __rpc_assert_all() {
            #( #wire )*
        }
        #( #sizes )*
    }
}

/// The variant's docs, or a generated line, and the opcode.
fn docs(call: &Call, verb: &str) -> TokenStream {
    let own = &call.docs;
    let line = format!(
        "{verb} `{}` (opcode `{:#010x}`{}).",
        call.ident,
        call.opcode,
        if call.oneway() { ", one-way" } else { "" }
    );
    if own.is_empty() {
        quote!(#[doc = #line])
    } else {
        quote!(#(#own)* #[doc = ""] #[doc = #line])
    }
}

/// The request parameter of a call's client method and handler (none for an empty request).
fn request_param(call: &Call) -> TokenStream {
    match call.request() {
        Some(Wire::Fixed(ty)) => quote!(, request: #ty),
        Some(Wire::Bytes) => quote!(, request: &[u8]),
        Some(Wire::Text) => quote!(, request: &str),
        Some(Wire::Unit) | None => quote!(),
    }
}

fn client_sig(call: &Call) -> TokenStream {
    let method = method_ident(call);
    let request = request_param(call);
    let err = quote!(::rpc_core::service::CallError);
    match call.response() {
        Some(Wire::Fixed(ty)) => {
            quote!(fn #method(&self #request) -> ::core::result::Result<#ty, #err>)
        }
        Some(Wire::Bytes) => quote! {
            fn #method<'__rpc_b>(&self #request, response: &'__rpc_b mut [u8])
                -> ::core::result::Result<&'__rpc_b mut [u8], #err>
        },
        Some(Wire::Text) => quote! {
            fn #method<'__rpc_b>(&self #request, response: &'__rpc_b mut [u8])
                -> ::core::result::Result<&'__rpc_b str, #err>
        },
        Some(Wire::Unit) | None => {
            quote!(fn #method(&self #request) -> ::core::result::Result<(), #err>)
        }
    }
}

fn client_body(call: &Call) -> TokenStream {
    let opcode = opcode_lit(call);
    let oneway = call.oneway();
    let p = quote!(::rpc_core::__private);
    let send = match call.request() {
        Some(Wire::Fixed(_)) => quote!(#p::send_value(&mut port, &request)?;),
        Some(Wire::Bytes) => quote!(#p::send_stream(&mut port, request, #oneway)?;),
        Some(Wire::Text) => quote!(#p::send_stream(&mut port, request.as_bytes(), #oneway)?;),
        Some(Wire::Unit) | None => quote!(#p::send_value(&mut port, &())?;),
    };
    let recv = match call.response() {
        Some(Wire::Fixed(ty)) => quote!(#p::recv_value::<#ty, _, _, _>(&mut port)),
        Some(Wire::Bytes) => quote!(#p::recv_stream(&mut port, response)),
        Some(Wire::Text) => quote!(#p::recv_text(&mut port, response)),
        Some(Wire::Unit) => quote!(#p::recv_value::<(), _, _, _>(&mut port)),
        None => quote!(::core::result::Result::Ok(())),
    };
    let inline = inline_types(call).map(|(q, r)| {
        let request = match call.request() {
            Some(Wire::Fixed(_)) => quote!(&request),
            _ => quote!(&()),
        };
        quote! {
            if let ::core::option::Option::Some(__result) =
                #p::inline_call::<#q, #r>(
                    ::rpc_core::service::CallSite::inline(self),
                    #opcode,
                    #request,
                )
            {
                return __result;
            }
        }
    });
    quote! {
        #inline
        let mut port = #p::open(::rpc_core::service::CallSite::process(self), #opcode)?;
        #send
        #recv
    }
}

/// The request and reply types of a call that may travel inline: fixed or empty both ways, and
/// answered (not one-way).
fn inline_types(call: &Call) -> Option<(TokenStream, TokenStream)> {
    if call.oneway() {
        return None;
    }
    let request = match call.request() {
        Some(Wire::Fixed(ty)) => quote!(#ty),
        Some(Wire::Unit) | None => quote!(()),
        Some(Wire::Bytes | Wire::Text) => return None,
    };
    let reply = match call.response() {
        Some(Wire::Fixed(ty)) => quote!(#ty),
        Some(Wire::Unit) => quote!(()),
        Some(Wire::Bytes | Wire::Text) | None => return None,
    };
    Some((request, reply))
}

/// A call's arm in `dispatch_inline`.
fn inline_arm(call: &Call, server: &Ident) -> TokenStream {
    let opcode = opcode_lit(call);
    let Some((q, r)) = inline_types(call) else {
        return quote!(#opcode => ::core::option::Option::None,);
    };
    let method = method_ident(call);
    let p = quote!(::rpc_core::__private);
    let s = quote!(::rpc_core::service);
    let bad = quote!(return ::core::option::Option::Some((#s::status::BAD_REQUEST, 0)));
    let (decode, args) = match call.request() {
        Some(Wire::Fixed(_)) => (
            quote! {
                let ::core::option::Option::Some(__request) = #p::inline_request::<#q>(request)
                else {
                    #bad;
                };
            },
            quote!(, __request),
        ),
        _ => (
            quote! {
                if #p::inline_request::<()>(request).is_none() {
                    #bad;
                }
            },
            quote!(),
        ),
    };
    quote! {
        #opcode => {
            if !#p::inline_fits::<#q, #r>() {
                return ::core::option::Option::None;
            }
            #decode
            #[allow(clippy::let_unit_value)]
            let __reply = <Self as #server>::#method(self #args);
            ::core::option::Option::Some((#s::status::OK, #p::inline_reply(reply, &__reply)))
        }
    }
}

fn handler_sig(call: &Call) -> TokenStream {
    let method = method_ident(call);
    let request = request_param(call);
    let response = match call.response() {
        Some(Wire::Fixed(ty)) => quote!(-> #ty),
        Some(Wire::Bytes) => quote!(-> impl ::core::convert::AsRef<[u8]>),
        Some(Wire::Text) => quote!(-> impl ::core::convert::AsRef<str>),
        Some(Wire::Unit) | None => quote!(),
    };
    quote!(fn #method(&self #request) #response)
}

fn dispatch_arm(call: &Call, server: &Ident) -> TokenStream {
    let opcode = opcode_lit(call);
    let method = method_ident(call);
    let oneway = call.oneway();
    let limit = call.limit();
    let p = quote!(::rpc_core::__private);
    let s = quote!(::rpc_core::service);
    let served = |status: TokenStream| {
        quote! {
            ::core::result::Result::Ok(#s::Served { opcode: #opcode, status: #status })
        }
    };
    let rejected = served(quote!(#s::status::REJECTED));
    let bad_request = served(quote!(#s::status::BAD_REQUEST));
    let ok = served(quote!(#s::status::OK));

    // A fixed (or empty) request with a fixed (or empty) reply: each slot becomes its reply in
    // place, one lane at a time (no per-call arrays of requests and replies).
    let in_place_request = match call.request() {
        Some(Wire::Fixed(ty)) => Some(quote!(, #p::read_slot::<#ty>(slot))),
        Some(Wire::Unit) | None => Some(quote!()),
        Some(Wire::Bytes | Wire::Text) => None,
    };
    let in_place_reply = match call.response() {
        Some(Wire::Fixed(_)) => Some(quote!(#p::write_slot(slot, &__reply))),
        Some(Wire::Unit) => Some(quote!(slot.words = [0; 8])),
        Some(Wire::Bytes | Wire::Text) | None => None,
    };
    if let (Some(args), Some(write)) = (in_place_request, in_place_reply) {
        return quote! {
            #opcode => {
                port.set_status(#s::status::OK);
                port.recv_and_send(|slot, _| {
                    #[allow(clippy::let_unit_value)]
                    let __reply = <Self as #server>::#method(self #args);
                    #write;
                })?;
                #ok
            }
        };
    }

    // Receive every handled lane's request.
    let recv = match call.request() {
        Some(Wire::Fixed(ty)) => quote! {
            let mut __requests: [::core::option::Option<#ty>; 64] =
                ::core::array::from_fn(|_| ::core::option::Option::None);
            port.recv(|slot, lane| {
                __requests[lane as usize] =
                    ::core::option::Option::Some(#p::read_slot::<#ty>(slot));
            })?;
        },
        Some(Wire::Unit) | None => quote!(port.recv(|_, _| {})?;),
        Some(Wire::Bytes) => quote! {
            if !#p::recv_stream_request(port, #limit, buffers, #oneway)? {
                return #rejected;
            }
        },
        Some(Wire::Text) => {
            let answer = if oneway {
                quote!()
            } else {
                quote!(#p::reply_error(port, #s::status::BAD_REQUEST)?;)
            };
            quote! {
                if !#p::recv_stream_request(port, #limit, buffers, #oneway)? {
                    return #rejected;
                }
                let ::core::option::Option::Some(__texts) = #p::lane_texts(&*buffers, __lanes)
                else {
                    #answer
                    return #bad_request;
                };
            }
        }
    };

    // The handler call for lane `__lane`.
    let handler = |args: TokenStream| quote!(<Self as #server>::#method(self #args));
    let keeps_reply = matches!(
        call.response(),
        Some(Wire::Fixed(_) | Wire::Bytes | Wire::Text)
    );
    let invoke = |call_expr: TokenStream| {
        if keeps_reply {
            quote!(__replies[__lane] = ::core::option::Option::Some(#call_expr);)
        } else {
            quote!(#call_expr;)
        }
    };
    let each = match call.request() {
        Some(Wire::Fixed(_)) => {
            let i = invoke(handler(quote!(, __request)));
            quote! {
                if let ::core::option::Option::Some(__request) = __requests[__lane].take() {
                    #i
                }
            }
        }
        Some(Wire::Bytes) => invoke(handler(
            quote!(, ::rpc_core::service::LaneBuffers::lane(&*buffers, __lane as u32)),
        )),
        Some(Wire::Text) => invoke(handler(quote!(, __texts[__lane]))),
        Some(Wire::Unit) | None => invoke(handler(quote!())),
    };
    let replies = if keeps_reply {
        quote! {
            let mut __replies: [::core::option::Option<_>; 64] =
                ::core::array::from_fn(|_| ::core::option::Option::None);
        }
    } else {
        quote!()
    };

    // Reply.
    let stream_reply = |bytes: TokenStream| {
        quote! {
            port.set_status(#s::status::OK);
            let sent = port.send_n(|lane| match &__replies[lane as usize] {
                ::core::option::Option::Some(reply) => #bytes,
                ::core::option::Option::None => &[],
            });
            match sent {
                ::core::result::Result::Ok(()) => {}
                // The client refused the response (its buffer was too small); it knows.
                ::core::result::Result::Err(::rpc_core::Error::Rejected) => return #rejected,
                ::core::result::Result::Err(e) => return ::core::result::Result::Err(e),
            }
        }
    };
    let reply = match call.response() {
        None => quote!(),
        Some(Wire::Unit) => quote! {
            port.set_status(#s::status::OK);
            port.send(|slot, _| slot.words = [0; 8])?;
        },
        Some(Wire::Fixed(_)) => quote! {
            port.set_status(#s::status::OK);
            port.send(|slot, lane| match &__replies[lane as usize] {
                ::core::option::Option::Some(reply) => #p::write_slot(slot, reply),
                ::core::option::Option::None => slot.words = [0; 8],
            })?;
        },
        Some(Wire::Bytes) => stream_reply(quote!(::core::convert::AsRef::<[u8]>::as_ref(reply))),
        Some(Wire::Text) => stream_reply(quote!(
            ::core::convert::AsRef::<str>::as_ref(reply).as_bytes()
        )),
    };

    quote! {
        #opcode => {
            let __lanes = #p::handled_lanes(port);
            #recv
            #replies
            let mut __mask = __lanes;
            while __mask != 0 {
                let __lane = __mask.trailing_zeros() as usize;
                __mask &= __mask - 1;
                #each
            }
            #reply
            #ok
        }
    }
}

#[cfg(test)]
mod tests {
    use super::derive;
    use std::path::Path;

    /// Formats generated tokens as a file, for comparison and for reading.
    fn pretty(tokens: proc_macro2::TokenStream) -> String {
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as items");
        prettyplease::unparse(&file)
    }

    /// The expansion of each `tests/expand/*.rs` must equal its `*.expanded.rs` golden file.
    /// `BLESS=1 cargo test -p rpc-derive` rewrites the golden files after a deliberate change.
    #[test]
    fn expansion_matches_golden_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expand");
        let mut checked = 0;
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .expect("tests/expand exists")
            .map(|e| e.expect("readable entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".rs") || name.ends_with(".expanded.rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            let file: syn::File = syn::parse_str(&source).unwrap();
            let item = file
                .items
                .iter()
                .find_map(|i| match i {
                    syn::Item::Enum(e) => Some(e),
                    _ => None,
                })
                .expect("one enum per input file");
            let expanded = pretty(derive(quote::quote!(#item)));
            let golden = path.with_extension("expanded.rs");
            if std::env::var_os("BLESS").is_some() {
                std::fs::write(&golden, &expanded).unwrap();
            }
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|_| panic!("{} is missing; run with BLESS=1", golden.display()));
            assert!(
                want == expanded,
                "expansion of {name} differs from {}:\n{expanded}",
                golden.display()
            );
            checked += 1;
        }
        assert!(checked > 0, "no expansion inputs found");
    }

    #[test]
    fn misuse_becomes_one_compile_error_with_fallback() {
        let out = derive(quote::quote! {
            enum Bad {
                #[rpc(request = u32)]
                Get,
            }
        })
        .to_string();
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("has no response"), "{out}");
        assert!(out.contains("trait BadServer"), "{out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    }
}

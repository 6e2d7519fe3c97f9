//! Code generation from a checked model. Everything generated names only `core` and `ferry_rpc`
//! (zerocopy through `ferry_rpc::__private`), so `no_std` crates can derive services; `krate`
//! then puts the user's path to `ferry_rpc` in place of `::ferry_rpc`.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use crate::ast::{Call, Service, Wire};
use crate::{fallback, krate, valid};

/// The derive: parse → model → check → generate; on misuse, the errors plus the fallback.
pub fn derive(input: TokenStream) -> TokenStream {
    krate::derive(input, "rpc", "RpcOpcodes", expand, fallback::expand)
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

/// How a type crosses, for the fingerprint: a fixed type's shape carries its `Schema` (spanned at
/// the type, so that a type without one is reported there).
fn shape(wire: &Wire) -> TokenStream {
    match wire {
        Wire::Unit => quote!(::ferry_rpc::service::Shape::of::<()>()),
        Wire::Fixed(ty) => fixed_shape(ty),
        Wire::Bytes => quote!(::ferry_rpc::service::Shape::Bytes),
        Wire::Text => quote!(::ferry_rpc::service::Shape::Text),
    }
}

/// The shape of fixed type `ty`, with its `Schema`.
fn fixed_shape(ty: &syn::Type) -> TokenStream {
    quote_spanned!(ty.span()=> ::ferry_rpc::service::Shape::of::<#ty>())
}

/// A type as written, without spaces (for the fingerprint).
fn written(ty: &syn::Type) -> String {
    quote!(#ty).to_string().replace(' ', "")
}

/// A call as the definition has it (`Service::CALLS`, from which the fingerprint is computed):
/// written types (a stream as `Bytes` or `Text`) and shapes.
fn call_info(call: &Call) -> TokenStream {
    let s = quote!(::ferry_rpc::service);
    let (name, method, opcode) = (call.ident.to_string(), &call.method, opcode_lit(call));
    let written_as = |wire: &Wire, ty: &syn::Type| match wire {
        Wire::Bytes => "Bytes".to_string(),
        Wire::Text => "Text".to_string(),
        _ => written(ty),
    };
    // A fixed type's shape carries its `Schema`: spanned at the type, so that a type without one
    // is reported there.
    let args = call.args.iter().map(|a| {
        let name = a.ident.to_string();
        match a.wire {
            Wire::Fixed(t) => {
                let ty = written(a.ty);
                quote_spanned!(t.span()=> #s::ArgInfo::of::<#t>(#name, #ty))
            }
            Wire::Text => quote!(#s::ArgInfo::text(#name)),
            _ => quote!(#s::ArgInfo::bytes(#name)),
        }
    });
    let args = (!call.args.is_empty()).then(|| quote!(.args(&[ #( #args ),* ])));
    let reply = match (call.response(), &call.attrs.response) {
        (None, _) => quote!(.oneway()),
        (Some(Wire::Fixed(t)), Some(r)) => {
            let ty = written(&r.value);
            quote_spanned!(t.span()=> .reply_of::<#t>(#ty))
        }
        (Some(w), Some(r)) => {
            let (ty, shape) = (written_as(&w, &r.value), shape(&w));
            quote!(.reply(#ty, #shape))
        }
        (Some(_), None) => quote!(),
    };
    let error = call.error().map(|e| {
        let ty = written(e);
        quote_spanned!(e.span()=> .error_of::<#e>(#ty))
    });
    quote!(#s::CallInfo::new(#name, #method, #opcode) #args #reply #error)
}

/// The size in bytes of a call's fixed arguments, packed.
fn args_size(call: &Call) -> TokenStream {
    let sizes: Vec<TokenStream> = call
        .fixed_args()
        .map(|a| {
            let ty = a.ty;
            quote!(::core::mem::size_of::<#ty>())
        })
        .collect();
    match sizes.is_empty() {
        true => quote!(0usize),
        false => quote!(#( #sizes )+*),
    }
}

/// The offset of each fixed argument in the packed bytes.
fn offsets(call: &Call) -> Vec<TokenStream> {
    let mut before: Vec<&syn::Type> = Vec::new();
    let mut out = Vec::new();
    for a in call.fixed_args() {
        out.push(quote!(0usize #( + ::core::mem::size_of::<#before>() )*));
        before.push(a.ty);
    }
    out
}

/// The size in bytes of a fixed reply (tagged when the call has an error type).
fn reply_size(call: &Call) -> TokenStream {
    let value = match call.response() {
        Some(Wire::Fixed(ty)) => quote!(::core::mem::size_of::<#ty>()),
        _ => quote!(0usize),
    };
    match call.error() {
        Some(e) => {
            let ty = reply_type(call);
            quote!(::ferry_rpc::__private::tagged::<#ty, #e>())
        }
        None => value,
    }
}

/// The reply's value type (fixed replies; `()` for none).
fn reply_type(call: &Call) -> TokenStream {
    match call.response() {
        Some(Wire::Fixed(ty)) => quote!(#ty),
        _ => quote!(()),
    }
}

/// The client's error type.
fn error_type(call: &Call) -> TokenStream {
    match call.error() {
        Some(e) => quote!(::ferry_rpc::service::Error<#e>),
        None => quote!(::ferry_rpc::service::Error),
    }
}

/// The pattern binding the decoded fixed arguments.
fn args_pattern(call: &Call) -> TokenStream {
    let names = arg_locals(call);
    quote!(( #( #names, )* ))
}

/// The server's locals for the decoded fixed arguments: names of the derive's own, so that an
/// argument called `handler`, `port`, `slot` or `reply` does not shadow the generated code's.
fn arg_locals(call: &Call) -> Vec<Ident> {
    (0..call.fixed_args().count())
        .map(|i| format_ident!("__rpc_arg{}", i))
        .collect()
}

fn generate(service: &Service) -> TokenStream {
    let g = Generator::new(service);
    let items = [
        g.checks(),
        g.call_items(),
        g.inherent(),
        g.dispatch_impl(),
        g.service_impl(),
        g.client(),
        g.async_client(),
        g.server_trait(),
        g.async_server(),
    ];
    quote!(#( #items )*)
}

/// What is generated for one service, item by item (as tarpc's `ServiceGenerator`): each method
/// emits one item or group of items, from the service and the names every item shares.
struct Generator<'a> {
    service: &'a Service<'a>,
    ident: &'a Ident,
    vis: &'a syn::Visibility,
    name: &'a str,
    client: Ident,
    server: Ident,
    async_client: Ident,
    async_server: Ident,
}

impl<'a> Generator<'a> {
    fn new(service: &'a Service<'a>) -> Self {
        let ident = service.ident;
        Generator {
            service,
            ident,
            vis: service.vis,
            name: &service.name,
            client: format_ident!("{}Client", ident),
            server: format_ident!("{}Server", ident),
            async_client: format_ident!("{}AsyncClient", ident),
            async_server: format_ident!("{}AsyncServer", ident),
        }
    }

    /// The opcodes' literals, in declaration order.
    fn opcodes(&self) -> Vec<TokenStream> {
        self.service.calls.iter().map(opcode_lit).collect()
    }

    /// What the compiler checks ([`assertions`]), and every call and argument marked as used.
    fn checks(&self) -> TokenStream {
        let ident = self.ident;
        let asserts = assertions(self.service);
        // Every call is reachable through dispatch; say so to dead-code analysis (a variant with
        // fields is built, in a function never called, from values that never exist).
        let used = self.service.calls.iter().map(|c| {
            let v = c.ident;
            match c.fields {
                syn::Fields::Unit => quote!(let _ = #ident::#v;),
                syn::Fields::Named(f) => {
                    let names = f.named.iter().map(|f| &f.ident);
                    quote!(let _ = #ident::#v { #( #names: loop {}, )* };)
                }
                syn::Fields::Unnamed(f) => {
                    let nevers = f.unnamed.iter().map(|_| quote!(loop {}));
                    quote!(let _ = #ident::#v( #( #nevers, )* );)
                }
            }
        });
        // And every argument is read (by the handler it is decoded for); say that too, or a
        // private service enum's fields are each "never read".
        let reads = self.service.calls.iter().map(|c| {
            let v = c.ident;
            let locals: Vec<Ident> = (0..c.fields.len())
                .map(|i| format_ident!("__rpc_f{}", i))
                .collect();
            let read = quote!(::core::mem::drop(( #( #locals, )* )));
            match c.fields {
                syn::Fields::Unit => quote!(#ident::#v => {}),
                syn::Fields::Named(f) => {
                    let names = f.named.iter().map(|f| &f.ident);
                    quote!(#ident::#v { #( #names: #locals ),* } => #read,)
                }
                syn::Fields::Unnamed(_) => quote!(#ident::#v( #( #locals ),* ) => #read,),
            }
        });
        quote! {
            const _: () = {
                #asserts
                // (A call marked `#[deprecated]` is named here, as in `opcode()`: the derive's
                // own uses of it are not the user's.)
                #[allow(dead_code, deprecated, unreachable_code, clippy::diverging_sub_expression)]
                fn __rpc_used() {
                    #( #used )*
                }
                #[allow(dead_code, deprecated)]
                fn __rpc_read(call: &#ident) {
                    match call {
                        #( #reads )*
                    }
                }
            };
        }
    }

    /// Each call's sizes, limit, constant `Call` and argument decoder, hidden on the service.
    fn call_items(&self) -> TokenStream {
        let ident = self.ident;
        let limits = limit_consts(self.service);
        let items = self.service.calls.iter().map(call_items);
        quote! {
            #[doc(hidden)]
            #[allow(dead_code, clippy::unnecessary_cast, clippy::cast_lossless)]
            impl #ident {
                #limits
                #( #items )*
            }
        }
    }

    /// The service's own items: `opcode()`, its name, fingerprint and opcodes, and the
    /// constructors of its servers and clients and `dispatch` and `serve_one`.
    fn inherent(&self) -> TokenStream {
        let (ident, name, server, client) = (self.ident, self.name, &self.server, &self.client);
        let (async_server, async_client) = (&self.async_server, &self.async_client);
        let opcodes = self.opcodes();
        let patterns: Vec<TokenStream> = self
            .service
            .calls
            .iter()
            .map(|c| {
                let v = c.ident;
                match c.fields {
                    syn::Fields::Unit => quote!(Self::#v),
                    syn::Fields::Named(_) => quote!(Self::#v { .. }),
                    syn::Fields::Unnamed(_) => quote!(Self::#v(..)),
                }
            })
            .collect();
        // One constant per call's opcode (a call with a `Bytes` or `Text` field has no value to
        // ask `opcode()` of).
        let opcode_consts = self.service.calls.iter().map(|c| {
            let name = format_ident!("OPCODE_{}", c.method.to_uppercase(), span = c.ident.span());
            let doc = format!("The opcode of call `{}`.", c.ident);
            let op = opcode_lit(c);
            quote!(#[doc = #doc] pub const #name: u32 = #op;)
        });
        quote! {
            impl #ident {
                /// This call's opcode.
                #[allow(deprecated)]
                pub const fn opcode(&self) -> u32 {
                    match self {
                        #( #patterns => #opcodes, )*
                    }
                }

                /// The schema fingerprint (`ferry_rpc::service::Service::FINGERPRINT`).
                pub const FINGERPRINT: u64 = <Self as ::ferry_rpc::service::Service>::FINGERPRINT;

                /// The service's name (`ferry_rpc::service::Service::NAME`).
                pub const NAME: &'static str = #name;

                #( #opcode_consts )*

                /// This service served by `handler` (any type implementing its server trait): what a
                /// transport's server serves; `.and(Other::server(h))` serves another beside it.
                pub fn server<__RpcH: #server>(
                    handler: __RpcH,
                ) -> ::ferry_rpc::service::Serving<Self, __RpcH> {
                    ::ferry_rpc::service::Serving::new(handler)
                }

                /// The client of this service over `site` (a call site of any transport).
                pub fn client<__RpcS: ::ferry_rpc::service::Site>(site: __RpcS) -> #client<__RpcS> {
                    #client(::ferry_rpc::__private::Calls::new(site))
                }

                ::ferry_rpc::__rpc_if_std! {
                    /// This service served by an async `handler` (any type implementing its async
                    /// server trait), its tasks spawned by `spawn` (`|task| { tokio::spawn(task); }`):
                    /// what a transport's server serves, as [`server`](Self::server)'s.
                    pub fn async_server<__RpcH: #async_server>(
                        handler: __RpcH,
                        spawn: impl ::ferry_rpc::service::Spawn,
                    ) -> ::ferry_rpc::service::AsyncServing<Self, __RpcH> {
                        ::ferry_rpc::service::AsyncServing::new(handler, spawn)
                    }
                }

                /// The async client of this service over `site` (a transport on which a caller
                /// waits without holding a thread: `ferry_shm::ShmClient`).
                pub fn async_client<__RpcS: ::ferry_rpc::service::AsyncSite>(
                    site: __RpcS,
                ) -> #async_client<__RpcS> {
                    #async_client(::ferry_rpc::__private::Calls::new(site))
                }

                /// Serves the call on `port`, a port a server just opened, with `handler`; `buffers`
                /// receives streamed arguments (`Vec::new()` with `alloc`). What was served, or the
                /// protocol error (see `ferry_rpc::service::Dispatch::dispatch`).
                #[inline]
                pub fn dispatch<__RpcH: #server + ?::core::marker::Sized>(
                    handler: &__RpcH,
                    port: &mut impl ::ferry_rpc::service::ServerPort,
                    buffers: &mut impl ::ferry_rpc::service::LaneBuffers,
                ) -> ::core::result::Result<::ferry_rpc::service::Served, ::ferry_rpc::Error> {
                    port.dispatch::<Self, __RpcH>(handler, buffers)
                }

                /// Serves one call if a client is waiting: opens a port, [`dispatch`](Self::dispatch)es
                /// it and closes it. `Ok(None)` when no call was pending.
                pub fn serve_one<__RpcH: #server + ?::core::marker::Sized>(
                    handler: &__RpcH,
                    server: &impl ::ferry_rpc::service::ServerProcess,
                    buffers: &mut impl ::ferry_rpc::service::LaneBuffers,
                ) -> ::core::result::Result<
                    ::core::option::Option<::ferry_rpc::service::Served>,
                    ::ferry_rpc::Error,
                > {
                    server.serve_one::<Self, __RpcH>(handler, buffers)
                }
            }
        }
    }

    /// `Dispatch`: the one match over the calls, each handler named once.
    fn dispatch_impl(&self) -> TokenStream {
        let (ident, server) = (self.ident, &self.server);
        let opcodes = self.opcodes();
        let arms = self
            .service
            .calls
            .iter()
            .map(|c| serve_arm(ident, c, server));
        quote! {
            impl<__RpcH: #server + ?::core::marker::Sized> ::ferry_rpc::service::Dispatch<__RpcH>
                for #ident
            {
                #[inline]
                fn has_opcode(opcode: u32) -> bool {
                    ::core::matches!(opcode, #( #opcodes )|*)
                }

                #[inline]
                fn serve<'__rpc_v, __RpcV: ::ferry_rpc::__private::Via<'__rpc_v>>(
                    handler: &'__rpc_v __RpcH,
                    opcode: u32,
                    via: __RpcV,
                ) -> __RpcV::Out {
                    match opcode {
                        #( #arms )*
                        ::ferry_rpc::service::HANDSHAKE => {
                            via.handshake(<#ident as ::ferry_rpc::service::Service>::FINGERPRINT)
                        }
                        _ => via.unknown(),
                    }
                }
            }
        }
    }

    /// `Service`: the name, the table of calls and the fingerprint computed from it.
    fn service_impl(&self) -> TokenStream {
        let (ident, name) = (self.ident, self.name);
        let opcodes = self.opcodes();
        let infos = self.service.calls.iter().map(call_info);
        quote! {
            impl ::ferry_rpc::service::Service for #ident {
                const NAME: &'static str = #name;
                const FINGERPRINT: u64 = ::ferry_rpc::service::Fingerprint::of(
                    #name,
                    <Self as ::ferry_rpc::service::Service>::CALLS,
                );
                const OPCODES: &'static [u32] = &[ #( #opcodes ),* ];
                const CALLS: &'static [::ferry_rpc::service::CallInfo] = &[ #( #infos ),* ];
            }
        }
    }

    /// The client: one method per call (and the `_with` and `_into` forms).
    fn client(&self) -> TokenStream {
        let (ident, name, vis, client) = (self.ident, self.name, self.vis, &self.client);
        let client_doc = format!(
            "The client of service `{name}`: one method per call of [`{ident}`], made through any \
             call site (`{ident}::client(&site)`: a client process in-process or on a GPU warp, a \
             shared-memory client between processes).\n\nOn a GPU every active lane calls a method \
             together with the others, each with its own arguments, and gets its own reply. A \
             server that does not know a call answers with an error instead of leaving the caller \
             waiting."
        );
        let client_methods: Vec<TokenStream> = self
            .service
            .calls
            .iter()
            .map(|c| {
                let plain = client_method(ident, c);
                let with = client_method_with(ident, c);
                quote!(#plain #with)
            })
            .collect();
        quote! {
            #[doc = #client_doc]
            #[derive(Clone, Copy, Debug)]
            #vis struct #client<__RpcS>(::ferry_rpc::__private::Calls<__RpcS>);

            #[allow(clippy::too_many_arguments)]
            impl<__RpcS: ::ferry_rpc::service::Site> #client<__RpcS> {
                /// This client with every call waiting at most `deadline` for the other side (on
                /// transports that keep time: between processes; a bare process waits under its own
                /// wait policy).
                pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
                    #client(self.0.with_deadline(deadline))
                }

                #( #client_methods )*
            }
        }
    }

    /// The async client: fixed calls awaited in place, the others made by the blocking client.
    fn async_client(&self) -> TokenStream {
        let (ident, name, vis) = (self.ident, self.name, self.vis);
        let (client, async_client) = (&self.client, &self.async_client);
        let async_methods: Vec<TokenStream> = self
            .service
            .calls
            .iter()
            .map(|c| async_client_method(ident, c))
            .collect();
        let async_doc = format!(
            "The async client of service `{name}`: one `async fn` per call of [`{ident}`], made \
             through a transport on which a caller waits without holding a thread \
             (`{ident}::async_client(&shm)` over a `ferry_shm::ShmClient`: its server wakes the \
             waiting task). Its futures are `Send`; a call dropped before its reply gives its port \
             up to the server, which answers it and takes the port back.\n\nCalls whose request and \
             reply travel in one exchange (fixed arguments and reply, or a streamed argument and a \
             fixed reply) are awaited in place; a one-way call and a call with a streamed reply are \
             made as [`{client}`] makes them, where the transport runs blocking calls (a helper \
             thread, for `ferry_shm`)."
        );
        quote! {
            #[doc = #async_doc]
            #[derive(Clone, Copy, Debug)]
            #vis struct #async_client<__RpcS>(::ferry_rpc::__private::Calls<__RpcS>);

            #[allow(clippy::too_many_arguments)]
            impl<__RpcS: ::ferry_rpc::service::AsyncSite> #async_client<__RpcS> {
                /// This client with every call waiting at most `deadline` for the other side.
                pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
                    #async_client(self.0.with_deadline(deadline))
                }

                #( #async_methods )*
            }
        }
    }

    /// The server trait: one handler per call.
    fn server_trait(&self) -> TokenStream {
        let (ident, name, vis, server) = (self.ident, self.name, self.vis, &self.server);
        let handler_sigs = self.service.calls.iter().map(handler_sig);
        let handler_docs = self.service.calls.iter().map(|c| docs(c, "Serves"));
        let server_doc = format!(
            "The server side of service `{name}`: one handler per call of [`{ident}`]. Serve it \
             with [`{ident}::dispatch`] (or a transport's server).\n\nA handler runs once for each \
             active lane of a call, in lane order (a host server handles every lane of a GPU \
             warp's call). Handlers take `&self`, so several server threads may share one service; \
             the trait has nothing but the handlers, so a handler is tested by calling it."
        );

        quote! {
            #[doc = #server_doc]
            #[allow(clippy::too_many_arguments)]
            #vis trait #server {
                #( #handler_docs #handler_sigs; )*
            }
        }
    }

    /// The async server trait, its handlers run to their end on a server thread where a call
    /// cannot wait as a task (`BlockOn`), and the calls that can (`DispatchLater`).
    fn async_server(&self) -> TokenStream {
        let (ident, name, vis) = (self.ident, self.name, self.vis);
        let (server, async_server) = (&self.server, &self.async_server);
        let calls = &self.service.calls;
        let handler_docs = calls.iter().map(|c| docs(c, "Serves"));
        let async_sigs = calls.iter().map(async_handler_sig);
        let block_on_methods = calls.iter().map(|c| block_on_method(c, async_server));
        let later_arms = calls.iter().map(|c| later_arm(ident, c, async_server));
        let async_server_doc = format!(
            "The async server side of service `{name}`: one handler per call of [`{ident}`], each an \
             `async fn` (write `async fn` in the impl). Serve it with \
             `{ident}::async_server(handler, spawn)`: the calls that come inline (fixed arguments \
             and reply, or a `Bytes` argument and a fixed reply) run as tasks of the executor that \
             `spawn` spawns on, holding no server thread while they wait; the others (streamed \
             replies, one-way calls, text arguments) run to their end on a server thread."
        );
        quote! {
            ::ferry_rpc::__rpc_if_std! {
                #[doc = #async_server_doc]
                #[allow(clippy::too_many_arguments)]
                #vis trait #async_server: ::core::marker::Send + ::core::marker::Sync + 'static {
                    #( #handler_docs #async_sigs; )*
                }

                #[allow(clippy::too_many_arguments)]
                impl<__RpcH: #async_server> #server for ::ferry_rpc::service::BlockOn<__RpcH> {
                    #( #block_on_methods )*
                }

                impl<__RpcH: #async_server> ::ferry_rpc::service::DispatchLater<__RpcH> for #ident {
                    fn dispatch_later(
                        handler: &::ferry_rpc::service::BlockOn<__RpcH>,
                        opcode: u32,
                        request: &[u8],
                        body: &[u8],
                        later: ::ferry_rpc::__private::Box<dyn ::ferry_rpc::service::Later>,
                    ) -> ::core::result::Result<(), ::ferry_rpc::__private::Box<dyn ::ferry_rpc::service::Later>> {
                        let _ = (handler, request, body);
                        match opcode {
                            #( #later_arms )*
                            _ => ::core::result::Result::Err(later),
                        }
                    }
                }
            }
        }
    }
}

/// Compile-time checks the macro cannot make itself, each spanned at the user's type: every
/// fixed type is zerocopy (each type once), a type written `Bytes` or `Text` is ferry's, and
/// what crosses in one slot fits (checked where each call's sizes are defined, [`call_items`];
/// named here so that they are evaluated).
fn assertions(service: &Service) -> TokenStream {
    let p = quote!(::ferry_rpc::__private);
    let mut seen = std::collections::HashSet::new();
    let mut checks = Vec::new();
    for call in &service.calls {
        let fixed = call
            .fixed_args()
            .map(|a| a.ty)
            .chain(match call.response() {
                Some(Wire::Fixed(ty)) => Some(ty),
                _ => None,
            })
            .chain(call.error());
        for ty in fixed {
            if seen.insert(written(ty)) {
                checks.push(quote_spanned!(ty.span()=> #p::wire::<#ty>();));
            }
        }
        // Naming a stream's type here also uses the user's import of it.
        let written = call
            .args
            .iter()
            .map(|a| a.ty)
            .chain(call.attrs.response.as_ref().map(|r| &r.value));
        for ty in written {
            let marker = match Wire::of(ty) {
                Wire::Bytes => quote!(Bytes),
                Wire::Text => quote!(Text),
                _ => continue,
            };
            checks.push(
                quote_spanned!(ty.span()=> #p::same::<::ferry_rpc::service::#marker, #ty>();),
            );
        }
    }
    let name = &service.name;
    let name_message = format!(
        "service name {name:?} does not fit transports' tables of served services (empty, longer \
         than 48 bytes, or with a NUL byte): give another `#[rpc(service = \"...\")]`"
    );
    quote! {
        ::core::assert!(::ferry_rpc::service::name_fits(#name), #name_message);
        #( #checks )*
    }
}

/// The variant's docs, or a generated line, and the opcode.
fn docs(call: &Call, verb: &str) -> TokenStream {
    let own = &call.docs;
    let line = format!(
        " {verb} `{}` (opcode `{:#010x}`{}).",
        call.ident,
        call.opcode,
        if call.oneway() {
            ", one-way: the client returns once the call is sent, and a later call of the same \
             client may be served before it"
        } else if call.attrs.values.is_some() {
            ", a values call: its handler must read none of the caller's memory and write none \
             of it, since a GPU caller makes it without the fences that would order that memory"
        } else {
            ""
        }
    );
    if own.is_empty() {
        quote!(#[doc = #line])
    } else {
        // The call's line continues the last paragraph of its own docs.
        quote!(#(#own)* #[doc = #line])
    }
}

/// The parameters of a call's client method and handler, after `&self`.
fn params(call: &Call) -> TokenStream {
    let each = call.args.iter().map(param);
    quote!(#( , #each )*)
}

/// One argument as a parameter.
fn param(a: &crate::ast::Arg) -> TokenStream {
    let n = &a.ident;
    match &a.wire {
        Wire::Bytes => quote!(#n: &[u8]),
        Wire::Text => quote!(#n: &str),
        Wire::Unit => quote!(#n: ()),
        Wire::Fixed(ty) => quote!(#n: #ty),
    }
}

/// The limit of a call's streams, per lane: the default, or the hidden associated constant that
/// holds the call's `limit = EXPR` (see [`limit_consts`]).
fn limit(service: &Ident, call: &Call) -> TokenStream {
    match &call.attrs.limit {
        Some(_) => {
            let c = limit_const(call);
            quote!(#service::#c)
        }
        None => {
            let d = crate::ast::DEFAULT_LIMIT;
            quote!(#d)
        }
    }
}

fn limit_const(call: &Call) -> Ident {
    format_ident!("__RPC_LIMIT_{}", call.index)
}

/// The most fixed arguments the runtime decodes as a tuple (`ferry_rpc::__private::Args`).
const ARGS_TUPLE: usize = 12;

/// The names of a call's items on the service type: its fixed arguments' bytes, its fixed
/// reply's bytes, and the function decoding its arguments (the runtime's, for a call of up to
/// `ARGS_TUPLE` of them).
fn call_names(service: &Ident, call: &Call) -> (TokenStream, TokenStream, TokenStream) {
    let q = format_ident!("__RPC_Q_{}", call.index);
    let r = format_ident!("__RPC_R_{}", call.index);
    let args = format_ident!("__rpc_args_{}", call.index);
    let tys: Vec<&syn::Type> = call.fixed_args().map(|a| a.ty).collect();
    let args = match tys.len() <= ARGS_TUPLE {
        true => quote!(::ferry_rpc::__private::args::<( #( #tys, )* )>),
        false => quote!(#service::#args),
    };
    (quote!(#service::#q), quote!(#service::#r), args)
}

/// A call's items on the service type, each written once for every dispatch that serves it: the
/// bytes of its fixed arguments and of its fixed reply (tagged where it has an error type), and
/// the function that decodes its arguments.
fn call_items(call: &Call) -> TokenStream {
    let p = quote!(::ferry_rpc::__private);
    let q_name = format_ident!("__RPC_Q_{}", call.index);
    let r_name = format_ident!("__RPC_R_{}", call.index);
    let args = format_ident!("__rpc_args_{}", call.index);
    let (q, r) = (args_size(call), reply_size(call));
    let q = quote_spanned!(call.ident.span()=> ::ferry_rpc::__private::args_slot(#q));
    let r = match matches!(call.response(), Some(Wire::Fixed(_))) || call.error().is_some() {
        true => {
            let span = call
                .attrs
                .response
                .as_ref()
                .map_or(call.ident.span(), |r| r.value.span());
            quote_spanned!(span=> ::ferry_rpc::__private::reply_slot(#r))
        }
        false => r,
    };
    let tys: Vec<&syn::Type> = call.fixed_args().map(|a| a.ty).collect();
    let offs = offsets(call);
    let made = format_ident!("__RPC_CALL_{}", call.index);
    let opcode = opcode_lit(call);
    // A call of up to `ARGS_TUPLE` fixed arguments decodes with the runtime's `args`
    // ([`call_names`]).
    let decode = (tys.len() > ARGS_TUPLE).then(|| {
        quote! {
            #[inline(always)]
            fn #args(__rpc_bytes: &[u8]) -> ::core::option::Option<( #( #tys, )* )> {
                ::core::option::Option::Some(( #( #p::take::<#tys>(__rpc_bytes, #offs)?, )* ))
            }
        }
    });
    quote! {
        const #q_name: usize = #q;
        const #r_name: usize = #r;
        const #made: #p::Call<{ Self::#q_name }, { Self::#r_name }> = #p::Call::new(#opcode);
        #decode
    }
}

/// What a call served inline takes besides its fixed arguments (`ferry_rpc::__private::Body`):
/// nothing, or a streamed argument up to its limit.
fn body_limit(service: &Ident, call: &Call) -> TokenStream {
    match call.stream_arg() {
        None => quote!(::core::option::Option::None),
        Some(_) => {
            let lim = limit(service, call);
            quote!(::core::option::Option::Some(#lim))
        }
    }
}

/// The handler called with a call's decoded arguments (and `__rpc_body` where it has a
/// streamed argument), its reply encoded into `__rpc_out`.
fn serve_encoded(call: &Call, server: &Ident) -> TokenStream {
    let method = method_ident(call);
    let names = arg_locals(call);
    let body = call.stream_arg().map(|_| quote!(, __rpc_body));
    let reply = quote!(&<__RpcH as #server>::#method(handler #(, #names)* #body));
    if call.error().is_some() {
        quote!(::ferry_rpc::__private::put_result(__rpc_out, #reply))
    } else {
        quote!(::ferry_rpc::__private::put(__rpc_out, 0, #reply))
    }
}

/// One `u64` constant per `limit = EXPR`, so the expression is evaluated once, in `const`
/// context, with an error at the user's expression if it is not an integer constant from 0 to
/// `u64::MAX` (any integer type: `usize` constants and literal arithmetic alike).
fn limit_consts(service: &Service) -> TokenStream {
    let each = service.calls.iter().filter_map(|call| {
        let expr = &call.attrs.limit.as_ref()?.value;
        let c = limit_const(call);
        Some(quote_spanned!(expr.span()=>
            const #c: u64 = ::ferry_rpc::__private::limit((#expr) as i128);
        ))
    });
    quote!(#( #each )*)
}

/// A client method's first lines: the call's fixed arguments packed into `__rpc_q` (the
/// call's `__RPC_Q_n` bytes).
fn pack_args(service: &Ident, call: &Call) -> TokenStream {
    let p = quote!(::ferry_rpc::__private);
    let (q, _, _) = call_names(service, call);
    let offs = offsets(call);
    let names: Vec<&Ident> = call.fixed_args().map(|a| &a.ident).collect();
    quote! {
        let mut __rpc_q = [0u8; #q];
        #( #p::put(&mut __rpc_q, #offs, &#names); )*
    }
}

/// The runtime's function that reads a call's fixed reply: tagged when it has an error type.
fn reply_reader(call: &Call) -> TokenStream {
    match call.error() {
        Some(_) => quote!(::ferry_rpc::__private::take_result),
        None => quote!(::ferry_rpc::__private::take_value),
    }
}

/// The streamed argument's bytes, as an expression of the client method's parameter.
fn stream_bytes(call: &Call) -> Option<TokenStream> {
    call.stream_arg().map(|a| {
        let n = &a.ident;
        match a.wire {
            Wire::Text => quote!(#n.as_bytes()),
            _ => quote!(#n),
        }
    })
}

/// A call's method(s) on the generated client.
fn client_method(service: &Ident, call: &Call) -> TokenStream {
    let method = method_ident(call);
    let docs = docs(call, "Calls");
    let params = params(call);
    let opcode = opcode_lit(call);
    let p = quote!(::ferry_rpc::__private);
    let s = quote!(::ferry_rpc::service);
    let err = error_type(call);
    let body = stream_bytes(call);
    let tagged = call.error().is_some();
    let lim = limit(service, call);
    // A streamed argument over the call's limit is refused before anything is sent, by a
    // one-lane caller (the server refuses it too, for a client that does not check): a one-way
    // call could not otherwise learn of it.
    let check = body.as_ref().map(|b| {
        quote! {
            #p::check_limit(__rpc_c, (#b).len(), #lim).map_err(#s::Error::widen)?;
        }
    });
    let pack = pack_args(service, call);
    let run = |inner: TokenStream| {
        quote! {
            #s::Site::call(
                &self.0.site,
                self.0.deadline,
                // On a GPU the call is made where it is written: a hot call whole (a call to a
                // function of its own passes the client through memory, a round trip to it per
                // field it reads), any other a call of the runtime's function shared by all.
                #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
                move |__rpc_c| { #check #inner },
            )
        }
    };
    let (q, _, _) = call_names(service, call);
    let made = format_ident!("__RPC_CALL_{}", call.index);
    // The arguments packed, then one call of the runtime's function for the kind of call.
    let decode = reply_reader(call);
    match call.response() {
        None => {
            let made = match &body {
                Some(b) => quote! {
                    #service::#made.stream(
                        &self.0, &__rpc_q, #b, #lim, true, #p::nothing,
                    )
                },
                None => {
                    let hot = call.attrs.hot.is_some();
                    quote!(#service::#made.oneway(&self.0, &__rpc_q, #hot))
                }
            };
            quote! {
                #docs
                pub fn #method(&self #params) -> ::core::result::Result<(), #err> {
                    #pack
                    #made
                }
            }
        }
        Some(Wire::Bytes | Wire::Text) => {
            let text = matches!(call.response(), Some(Wire::Text));
            let into = format_ident!("{}_into", call.method, span = call.ident.span());
            let (ret_into, ret_own, conv_own) = if text {
                (
                    quote!(&'__rpc_b str),
                    quote!(#p::String),
                    quote!(#p::string(__rpc_b)),
                )
            } else {
                (
                    quote!(&'__rpc_b mut [u8]),
                    quote!(#p::Vec<u8>),
                    quote!(::core::result::Result::Ok(__rpc_b)),
                )
            };
            let bodyarg = match &body {
                Some(b) => quote!(::core::option::Option::Some(#b)),
                None => quote!(::core::option::Option::None),
            };
            let unwrap = if tagged {
                quote!(#p::reply_bytes(__rpc_r)?)
            } else {
                quote!(__rpc_r.bytes)
            };
            let (unwrap_fn, read_fn) = (
                match tagged {
                    true => quote!(#p::reply_bytes),
                    false => quote!(#p::untagged),
                },
                match text {
                    true => quote!(#p::text_in),
                    false => quote!(#p::bytes),
                },
            );
            let run_own = run(quote! {
                let __rpc_r = #p::call_vec::<_, { #q }>(
                    __rpc_c, #opcode, &__rpc_q, #bodyarg, #lim, #tagged,
                ).map_err(#s::Error::widen)?;
                let __rpc_b = #unwrap;
                #conv_own
            });
            let into_doc = format!(
                "As [`{0}`](Self::{0}), the reply written into `out` (no allocation): a reply \
             longer than `out` is `Status::ReplyTooLarge`, and the port is left at rest.",
                call.method
            );
            quote! {
                ::ferry_rpc::__rpc_if_alloc! {
                    #docs
                    pub fn #method(&self #params) -> ::core::result::Result<#ret_own, #err> {
                        #pack
                        #run_own
                    }
                }

                #[doc = #into_doc]
                pub fn #into<'__rpc_b>(
                    &self #params,
                    __rpc_out: &'__rpc_b mut [u8],
                ) -> ::core::result::Result<#ret_into, #err> {
                    #pack
                    #service::#made.into(
                        &self.0, &__rpc_q, #bodyarg, __rpc_out, #lim, #unwrap_fn, #read_fn,
                    )
                }
            }
        }
        Some(_) => {
            let ty = reply_type(call);
            let made = match &body {
                Some(b) => quote! {
                    #service::#made.stream(
                        &self.0, &__rpc_q, #b, #lim, false, #decode,
                    )
                },
                None => {
                    let f = match (call.attrs.values.is_some(), call.attrs.hot.is_some()) {
                        (false, false) => quote!(fixed),
                        (true, false) => quote!(fixed_values),
                        (false, true) => quote!(fixed_hot),
                        (true, true) => quote!(fixed_values_hot),
                    };
                    quote!(#service::#made.#f(&self.0, &__rpc_q, #decode))
                }
            };
            quote! {
                #docs
                #[inline]
                pub fn #method(&self #params) -> ::core::result::Result<#ty, #err> {
                    #pack
                    #made
                }
            }
        }
    }
}

/// A call's method on the generated async client: awaited in place through the site's exchange
/// when its reply is fixed (or empty), else the blocking client's method run by the site's
/// `blocking` (a one-way call, a streamed reply).
fn async_client_method(service: &Ident, call: &Call) -> TokenStream {
    let method = method_ident(call);
    let client = format_ident!("{}Client", service);
    let docs = docs(call, "Calls");
    let params = params(call);
    let p = quote!(::ferry_rpc::__private);
    let s = quote!(::ferry_rpc::service);
    let err = error_type(call);
    let lim = limit(service, call);
    let body = stream_bytes(call);
    // As the blocking client: a streamed argument over the limit is refused before anything is
    // sent.
    let check = body.as_ref().map(|b| {
        quote! {
            #p::check_limit_len((#b).len(), #lim).map_err(#s::Error::widen)?;
        }
    });
    let oneway_or_stream = call.oneway() || call.streams_reply();
    if !oneway_or_stream {
        let made = format_ident!("__RPC_CALL_{}", call.index);
        let pack = pack_args(service, call);
        let ty = reply_type(call);
        let decode = reply_reader(call);
        let made = match &body {
            Some(b) => quote! {
                #service::#made.stream_async(&self.0, __rpc_q, #b, #lim, #decode)
            },
            None => quote!(#service::#made.fixed_async(&self.0, __rpc_q, #decode)),
        };
        return quote! {
            #docs
            pub async fn #method(&self #params) -> ::core::result::Result<#ty, #err> {
                #pack
                #made.await
            }
        };
    }
    // Made by the blocking client, where the site runs it: the arguments moved there, a streamed
    // one copied.
    let (owned, passed) = moved_args(call);
    let ret = owned_reply(call);
    quote! {
        ::ferry_rpc::__rpc_if_alloc! {
            #docs
            pub async fn #method(&self #params) -> ::core::result::Result<#ret, #err> {
                #check
                #owned
                #s::AsyncSite::blocking(&self.0.site, self.0.deadline, move |__rpc_s, __rpc_d| {
                    let __rpc_c = #service::client(__rpc_s);
                    let __rpc_c = match __rpc_d {
                        ::core::option::Option::Some(d) => __rpc_c.with_deadline(d),
                        ::core::option::Option::None => __rpc_c,
                    };
                    // (Named through the type: a call named `into` would find `Into::into`.)
                    #client::#method(&__rpc_c, #( #passed ),*)
                })
                .await
            }
        }
    }
}

/// For a call with a `Bytes` argument and a fixed reply (or none): `<method>_with`, which has the
/// caller write the bytes in place (`fill`) instead of passing a slice: into the transport's
/// memory where it carries them there (a shared-memory port's bulk area), else into a buffer.
fn client_method_with(service: &Ident, call: &Call) -> TokenStream {
    let Some(stream) = call.stream_arg().filter(|_| call.fills_in_place()) else {
        return quote!();
    };
    let (q, _, _) = call_names(service, call);
    let method = method_ident(call);
    let with = format_ident!("{}_with", call.method, span = call.ident.span());
    let p = quote!(::ferry_rpc::__private);
    let s = quote!(::ferry_rpc::service);
    let err = error_type(call);
    let pack = pack_args(service, call);
    let fixed = call.fixed_args().map(param);
    // The two parameters' names, unless a fixed argument has one of them.
    let taken = |n: &str| call.fixed_args().any(|a| a.ident == n);
    let len = if taken("len") {
        format_ident!("__rpc_len")
    } else {
        format_ident!("len")
    };
    let fill = if taken("fill") {
        format_ident!("__rpc_fill")
    } else {
        format_ident!("fill")
    };
    let lim = limit(service, call);
    let opcode = opcode_lit(call);
    let stream_name = &stream.ident;
    let doc = format!(
        "As [`{method}`](Self::{method}), with `{stream_name}`'s `{len}` bytes written by \
         `{fill}` where they travel: in place in the transport's memory where it carries them \
         there (a shared-memory port's bulk area: no copy), else into a buffer of `{len}` bytes \
         that is then sent. `{fill}` gets the `{len}` bytes to write (their old contents are \
         unspecified) and may be called more than once (when the server has the call go \
         through another path)."
    );
    let (ret, r, tail) = match call.response() {
        None => (quote!(()), quote!(0usize), quote!(.map(|_| ()))),
        _ => {
            let ty = reply_type(call);
            let (_, r, _) = call_names(service, call);
            let decode = if call.error().is_some() {
                quote!(.and_then(|__rpc_r| #p::take_result(&__rpc_r)))
            } else {
                quote!(.and_then(|__rpc_r| #p::take_value(&__rpc_r)))
            };
            (ty, r, decode)
        }
    };
    let oneway = call.oneway();
    quote! {
        ::ferry_rpc::__rpc_if_alloc! {
            #[doc = #doc]
            pub fn #with(
                &self
                #( , #fixed )*,
                #len: usize,
                mut #fill: impl ::core::ops::FnMut(&mut [u8]),
            ) -> ::core::result::Result<#ret, #err> {
                #pack
                const __RPC_R: usize = #r;
                #s::Site::call(&self.0.site, self.0.deadline, move |__rpc_c| {
                    #p::check_limit(__rpc_c, #len, #lim).map_err(#s::Error::widen)?;
                    #p::call_stream_with::<_, { #q }, __RPC_R>(
                        __rpc_c, #opcode, &__rpc_q, #len, &mut #fill, #oneway,
                    )
                    .map_err(#s::Error::widen)
                    #tail
                })
            }
        }
    }
}

/// The reply's encoding into `__rpc_buf` from the handler's `__rpc_reply` (tagged when the call
/// has an error type).
fn encode_reply(call: &Call) -> TokenStream {
    let p = quote!(::ferry_rpc::__private);
    if call.error().is_some() {
        quote!(#p::put_result(&mut __rpc_buf, &__rpc_reply))
    } else {
        quote!(#p::put(&mut __rpc_buf, 0, &__rpc_reply))
    }
}

/// Whether a call can travel inline: a fixed reply (or none), and no text argument (text would be
/// checked for UTF-8 where it lies, in memory the peer can write: it goes through the packets,
/// copied before the check, see `serve_arm`).
fn travels_inline(call: &Call) -> bool {
    matches!(call.response(), Some(Wire::Fixed(_) | Wire::Unit))
        && !call
            .stream_arg()
            .is_some_and(|a| matches!(a.wire, Wire::Text))
}

/// For a call's arguments moved into a task or onto another thread: the statement that copies
/// its streamed argument into an owned `Vec<u8>` or `String` of the same name, and the arguments
/// as passed to a method that takes them as the client and the handler do (the copy borrowed).
fn moved_args(call: &Call) -> (Option<TokenStream>, Vec<TokenStream>) {
    let p = quote!(::ferry_rpc::__private);
    let owned = call.stream_arg().map(|a| {
        let n = &a.ident;
        match a.wire {
            Wire::Text => quote!(let #n: #p::String = #n.into();),
            _ => quote!(let #n: #p::Vec<u8> = #n.into();),
        }
    });
    let passed = call
        .args
        .iter()
        .map(|a| {
            let n = &a.ident;
            if a.wire.is_stream() {
                quote!(&#n)
            } else {
                quote!(#n)
            }
        })
        .collect();
    (owned, passed)
}

/// A call's reply value as an owned type: a fixed one's type, `Vec<u8>` or `String` for a
/// streamed one, `()` for none (the async client's and the async handlers' return).
fn owned_reply(call: &Call) -> TokenStream {
    let p = quote!(::ferry_rpc::__private);
    match call.response() {
        Some(Wire::Bytes) => quote!(#p::Vec<u8>),
        Some(Wire::Text) => quote!(#p::String),
        _ => reply_type(call),
    }
}

/// A call's handler in the async server trait: as in the blocking one, returning a future of its
/// value (a streamed reply as `Vec<u8>` or `String`).
fn async_handler_sig(call: &Call) -> TokenStream {
    let method = method_ident(call);
    let params = params(call);
    let value = owned_reply(call);
    let ret = match call.error() {
        Some(e) => quote!(::core::result::Result<#value, #e>),
        None => value,
    };
    quote! {
        fn #method(&self #params)
            -> impl ::core::future::Future<Output = #ret> + ::core::marker::Send
    }
}

/// A call's blocking handler for an async one: its future run as a task of the server's executor
/// (a streamed argument copied into it), waited for on the calling thread.
fn block_on_method(call: &Call, async_server: &Ident) -> TokenStream {
    let sig = handler_sig(call);
    let method = method_ident(call);
    let p = quote!(::ferry_rpc::__private);
    let (owned, passed) = moved_args(call);
    quote! {
        #sig {
            let __rpc_h = #p::Arc::clone(self.handler());
            #owned
            // (Named through the trait: a call named as a method of `Arc` or of a prelude trait,
            // `clone` or `into`, would find that method first.)
            self.run(async move { <__RpcH as #async_server>::#method(&*__rpc_h, #( #passed ),*).await })
        }
    }
}

/// A call's arm in the generated `dispatch_later`: a call that travels inline (as in
/// `dispatch_inline`) decoded and its handler spawned as a task; any other given back.
fn later_arm(service: &Ident, call: &Call, async_server: &Ident) -> TokenStream {
    let opcode = opcode_lit(call);
    if !travels_inline(call) {
        return quote!();
    }
    let p = quote!(::ferry_rpc::__private);
    let (q, r, args) = call_names(service, call);
    let method = method_ident(call);
    let pat = args_pattern(call);
    let names = arg_locals(call);
    let encode = encode_reply(call);
    let limit = body_limit(service, call);
    let (body, own_body, body_arg) = match call.stream_arg() {
        None => (quote!(_), quote!(), None),
        Some(_) => (
            quote!(__rpc_body),
            quote!(let __rpc_body: #p::Vec<u8> = __rpc_body.into();),
            Some(quote!(&__rpc_body)),
        ),
    };
    let passed = names.iter().map(|n| quote!(#n)).chain(body_arg);
    quote! {
        #opcode => #p::later_fixed::<{ #q }, { #r }, _>(
            #limit, request, body, later, #args, |#pat, #body, later| {
                #own_body
                let __rpc_h = #p::Arc::clone(handler.handler());
                handler.spawner().spawn(#p::task::<{ #r }>(later, async move {
                    #[allow(clippy::let_unit_value)]
                    let __rpc_reply =
                        <__RpcH as #async_server>::#method(&*__rpc_h, #( #passed ),*).await;
                    let mut __rpc_buf = [0u8; #r];
                    #encode;
                    __rpc_buf
                }));
            },
        ),
    }
}

fn handler_sig(call: &Call) -> TokenStream {
    let method = method_ident(call);
    let params = params(call);
    let value = match call.response() {
        Some(Wire::Fixed(ty)) => Some(quote!(#ty)),
        Some(Wire::Bytes) => Some(quote!(impl ::core::convert::AsRef<[u8]>)),
        Some(Wire::Text) => Some(quote!(impl ::core::convert::AsRef<str>)),
        Some(Wire::Unit) | None => None,
    };
    let ret = match (call.error(), value) {
        (Some(e), Some(v)) => quote!(-> ::core::result::Result<#v, #e>),
        (Some(e), None) => quote!(-> ::core::result::Result<(), #e>),
        (None, Some(v)) => quote!(-> #v),
        (None, None) => quote!(),
    };
    quote!(fn #method(&self #params) #ret)
}

/// A call's arm in the generated `serve`: the kind of call, which the path it came by serves
/// as it serves that kind (`ferry_rpc::__private::Via`), with its handler named once.
fn serve_arm(service: &Ident, call: &Call, server: &Ident) -> TokenStream {
    let opcode = opcode_lit(call);
    let method = method_ident(call);
    let oneway = call.oneway();
    let p = quote!(::ferry_rpc::__private);
    let s = quote!(::ferry_rpc::service);
    let (_, r, args) = call_names(service, call);
    let made = format_ident!("__RPC_CALL_{}", call.index);
    let pat = args_pattern(call);
    let names = arg_locals(call);
    let encode_into = |buf: TokenStream, value: TokenStream| {
        if call.error().is_some() {
            quote!(#p::put_result(#buf, #value))
        } else {
            quote!(#p::put(#buf, 0, #value))
        }
    };
    // On every path, a request whose fixed arguments are not this call's length (a client built
    // from another definition that skipped the checked attach, or one that did not say it) is
    // refused before any byte of it is read.

    // Fixed arguments and a fixed reply: through the packets, every lane's arguments are checked
    // first (nothing runs if one does not decode), then each slot becomes its reply in place, in
    // one pass where the arguments cannot fail to decode (every byte pattern a value); inline and
    // on word lines as they come.
    let fixed_reply = matches!(call.response(), Some(Wire::Fixed(_) | Wire::Unit));
    if call.stream_arg().is_none() && fixed_reply {
        let tys: Vec<&syn::Type> = call.fixed_args().map(|a| a.ty).collect();
        let serve = serve_encoded(call, server);
        return quote! {
            #opcode => via.fixed(
                #service::#made,
                ::ferry_rpc::__rpc_infallible!(#( #tys ),*),
                #args,
                |#pat, __rpc_out| #serve,
            ),
        };
    }

    // Everything else: every handled lane's arguments received and decoded, then the handlers,
    // then the replies. A request is read where it lies, except a text argument (checked once,
    // so copied out of the shared area first) and the request of a streamed reply (which may
    // borrow it, and is written into the same bulk area).
    let stream = body_limit(service, call);
    let text_arg = call
        .stream_arg()
        .is_some_and(|a| matches!(a.wire, Wire::Text));
    let in_place = !matches!(call.response(), Some(Wire::Bytes | Wire::Text)) && !text_arg;
    let (body_param, body_arg) = match call.stream_arg().map(|a| &a.wire) {
        None => (quote!(_), quote!()),
        Some(Wire::Text) => (quote!(__rpc_body), quote!(, #p::checked_text(__rpc_body))),
        Some(_) => (quote!(__rpc_body), quote!(, __rpc_body)),
    };
    let handle = quote!(<__RpcH as #server>::#method(handler #(, #names)* #body_arg));
    let encode = encode_into(quote!(__rpc_out), quote!(__rpc_reply));
    if in_place {
        let encode = match call.response() {
            None => quote!({
                let _ = (__rpc_reply, __rpc_out);
            }),
            _ => encode,
        };
        return quote! {
            #opcode => via.in_place(
                #service::#made, #oneway, #stream, #args,
                |#pat, #body_param| #handle,
                |__rpc_reply, __rpc_out| #encode,
            ),
        };
    }
    let as_bytes = match call.response() {
        Some(Wire::Text) => quote!(::core::convert::AsRef::<str>::as_ref(v).as_bytes()),
        _ => quote!(::core::convert::AsRef::<[u8]>::as_ref(v)),
    };
    let send = match call.response() {
        // (A one-way call sends nothing: never called.)
        None => quote!(|__rpc_port, _| ::core::result::Result::Ok(#s::Served {
            opcode: #p::Replies::opcode(__rpc_port),
            status: #s::status::OK,
        })),
        Some(Wire::Fixed(_) | Wire::Unit) => quote! {
            |__rpc_port, __rpc_replies| #p::send_fixed_replies::<{ #r }, _, _>(
                __rpc_port, __rpc_replies, |__rpc_reply, __rpc_out| #encode,
            )
        },
        Some(Wire::Bytes | Wire::Text) => match call.error() {
            Some(e) => quote! {
                |__rpc_port, __rpc_replies| #p::send_stream_replies_tagged::<
                    { 1 + ::core::mem::size_of::<#e>() }, _, _, _,
                >(__rpc_port, __rpc_replies, |v| #as_bytes)
            },
            None => quote! {
                |__rpc_port, __rpc_replies| #p::send_stream_replies(__rpc_port, __rpc_replies, |v| #as_bytes)
            },
        },
    };
    quote! {
        #opcode => via.copied(
            #service::#made, #oneway, #stream, #text_arg, #args,
            |#pat, #body_param| #handle,
            #send,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::derive;
    use quote::ToTokens;
    use std::path::Path;

    /// Formats generated tokens as a file, for comparison and for reading.
    fn pretty(tokens: proc_macro2::TokenStream) -> String {
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as items");
        prettyplease::unparse(&file)
    }

    /// The expansion of an input file's items: each struct or enum through the derives its
    /// `#[derive(..)]` names (`RpcOpcodes`, `Schema`), in order, or through `#[wire]` (the item
    /// as the attribute rewrites it, without the attribute itself).
    fn expand_items(file: &syn::File) -> String {
        let mut out = String::new();
        for item in &file.items {
            let attrs = match item {
                syn::Item::Enum(e) => &e.attrs,
                syn::Item::Struct(s) => &s.attrs,
                _ => continue,
            };
            if let Some(at) = attrs.iter().position(|a| a.path().is_ident("wire")) {
                let mut item = item.clone();
                if let syn::Item::Enum(syn::ItemEnum { attrs, .. })
                | syn::Item::Struct(syn::ItemStruct { attrs, .. }) = &mut item
                {
                    attrs.remove(at);
                }
                let tokens = quote::quote!(#item);
                out.push_str(&pretty(crate::wire::attribute(
                    proc_macro2::TokenStream::new(),
                    tokens,
                )));
                continue;
            }
            let tokens = quote::quote!(#item);
            let derives: Vec<String> = attrs
                .iter()
                .filter(|a| a.path().is_ident("derive"))
                .map(|a| a.meta.to_token_stream().to_string())
                .collect();
            let named = |name: &str| derives.iter().any(|d| d.contains(name));
            if named("RpcOpcodes") {
                out.push_str(&pretty(derive(tokens.clone())));
            }
            if named("Schema") {
                out.push_str(&pretty(crate::schema::derive(tokens)));
            }
        }
        out
    }

    /// The expansion of each `tests/expand/*.rs` must equal its `*.expanded.rs` golden file.
    /// `BLESS=1 cargo test -p ferry-derive` rewrites the golden files after a deliberate change.
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
            let expanded = expand_items(&file);
            assert!(!expanded.is_empty(), "{name} derives nothing");
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
        assert!(out.contains("is gone"), "{out}");
        assert!(out.contains("trait BadServer"), "{out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    }
}

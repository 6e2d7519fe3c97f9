//! What a derive emits when it rejects its input: the errors, plus stand-ins for the items it
//! would have generated (for `RpcOpcodes` the `Service` impl, the client type and the server
//! trait; for `Schema` its impl), so that code using them reports nothing further and the user
//! sees only the misuse itself.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::DeriveInput;

/// The errors and the stand-ins.
pub fn expand(input: &DeriveInput, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let ident = &input.ident;
    let vis = &input.vis;
    let client = format_ident!("{}Client", ident);
    let server = format_ident!("{}Server", ident);
    // The stand-in's name matters to no one: the build fails on the error above.
    let name = ident.to_string();
    let service = if input.generics.params.is_empty() {
        quote! {
            impl ::ferry_rpc::service::Service for #ident {
                const NAME: &'static str = #name;
                const FINGERPRINT: u64 = 0;
                const OPCODES: &'static [u32] = &[];
            }
        }
    } else {
        quote!()
    };
    let client_fn = if input.generics.params.is_empty() {
        quote! {
            impl #ident {
                #[allow(missing_docs, dead_code)]
                pub fn client<S>(site: S) -> #client<S> {
                    #client(site)
                }
            }
        }
    } else {
        quote!()
    };
    quote! {
        #errors
        #service
        #client_fn
        #[allow(missing_docs, dead_code)]
        #vis struct #client<S>(S);
        #[allow(missing_docs)]
        #vis trait #server {}
    }
}

/// `#[derive(Schema)]`'s errors and a stand-in impl (for a type without generics: a generic one's
/// bounds are not known).
pub fn schema(input: &DeriveInput, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let ident = &input.ident;
    let schema = if input.generics.params.is_empty() {
        quote! {
            impl ::ferry_rpc::service::Schema for #ident {
                const SCHEMA: u64 = 0;
            }
        }
    } else {
        quote!()
    };
    quote! {
        #errors
        #schema
    }
}

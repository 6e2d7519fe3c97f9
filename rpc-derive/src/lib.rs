//! `#[derive(RpcOpcodes)]`: typed services over the ferry mailbox protocol.
//!
//! Placeholder for the guide.

mod ast;
mod attr;
mod expand;
mod fallback;
mod valid;

/// Derives a typed service from an enum with one variant per call (see the crate docs).
#[proc_macro_derive(RpcOpcodes, attributes(rpc))]
pub fn derive_rpc_opcodes(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::derive(input.into()).into()
}

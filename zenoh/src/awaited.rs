//! Async calls through zenoh: `Counter::async_client(&client)` over a [`ZenohClient`], the same
//! generated `async fn`s as over shared memory, for any executor.
//!
//! A call with a fixed reply (with or without a streamed argument) is one query whose reply is
//! awaited on zenoh's own channel: no thread is held while it is on its way, and any number of
//! calls may be in flight from a few threads. A one-way call and a call with a streamed reply
//! are made by the blocking client on the client's helper threads
//! ([`HELPERS`] at most, started when first needed, each with a client of its own on the same
//! session), while the task awaits their result: the generated async client hands them to its
//! site whole (`AsyncSite::blocking`), as it does over shared memory.
//!
//! Deadlines are the blocking client's: the query's timeout, after which zenoh ends the query
//! and the call returns `Transport::Deadline`. A call dropped before its reply (a cancelled
//! task) drops its query; a server that already took it still makes the call.

use std::time::Duration;

use ferry_rpc::__private::Reply;
use ferry_rpc::service::{self, AsyncSite, Helpers, ReplyShape, WholeRequest};

use crate::client::ZenohClient;

/// The most helper threads a client runs blocking calls on at once (others queue).
pub const HELPERS: usize = 16;

/// Awaited calls through a client: a call with a fixed reply is a query awaited in place; any
/// other runs on the client's helper threads.
impl AsyncSite for ZenohClient {
    type Blocking = ZenohClient;

    async fn call_fixed<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        request: [u8; Q],
    ) -> Result<Reply<R>, service::Error> {
        self.awaited(deadline, opcode, &request, None).await
    }

    async fn call_stream<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        prefix: [u8; Q],
        body: &[u8],
    ) -> Result<Reply<R>, service::Error> {
        self.awaited(deadline, opcode, &prefix, Some(body)).await
    }

    async fn blocking<T: Send + 'static>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&ZenohClient, Option<Duration>) -> T + Send + 'static,
    ) -> T {
        let helpers = self
            .helpers
            .get_or_init(|| Helpers::new(HELPERS, "ferry-zenoh-helper"));
        helpers.run(|_| self.twin(), deadline, call).await
    }
}

impl ZenohClient {
    /// A call with a fixed reply of `R` bytes, as one query awaited in place.
    async fn awaited<const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        prefix: &[u8],
        body: Option<&[u8]>,
    ) -> Result<Reply<R>, service::Error> {
        let request = WholeRequest {
            opcode,
            prefix,
            body,
            reply: ReplyShape::Fixed(R),
        };
        let mut reply = Reply::<R>::new();
        let deadline = deadline.unwrap_or(self.default_deadline());
        self.query_fixed(&request, &mut reply.bytes, deadline)
            .await?;
        Ok(reply)
    }
}

// An awaited call's future may move between threads (what `AsyncSite` asks).
const _: () = {
    fn send<T: Send>(_: &T) {}
    #[allow(dead_code)]
    fn futures_are_send(client: &ZenohClient) {
        send(&client.call_fixed::<8, 8>(None, 0, [0; 8]));
        send(&client.call_stream::<8, 8>(None, 0, [0; 8], &[]));
        send(&client.blocking(None, |_, _| ()));
    }
};

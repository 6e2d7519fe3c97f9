const _: () = {
    ::core::assert!(
        ::ferry_rpc::service::name_fits("counter"),
        "service name \"counter\" does not fit transports' tables of served services (empty, longer than 48 bytes, or with a NUL byte): give another `#[rpc(service = \"...\")]`"
    );
    ::ferry_rpc::__private::wire::<u64>();
    ::ferry_rpc::__private::wire::<u32>();
    ::ferry_rpc::__private::wire::<StoreError>();
    ::ferry_rpc::__private::same::<::ferry_rpc::service::Bytes, Bytes>();
    ::ferry_rpc::__private::same::<::ferry_rpc::service::Text, Text>();
    #[allow(dead_code, deprecated, unreachable_code, clippy::diverging_sub_expression)]
    fn __rpc_used() {
        let _ = Counter::Add { n: loop {} };
        let _ = Counter::Put {
            key: loop {},
            value: loop {},
        };
        let _ = Counter::Name { key: loop {} };
        let _ = Counter::Touch(loop {});
        let _ = Counter::Reset;
    }
    #[allow(dead_code, deprecated)]
    fn __rpc_read(call: &Counter) {
        match call {
            Counter::Add { n: __rpc_f0 } => ::core::mem::drop((__rpc_f0,)),
            Counter::Put { key: __rpc_f0, value: __rpc_f1 } => {
                ::core::mem::drop((__rpc_f0, __rpc_f1))
            }
            Counter::Name { key: __rpc_f0 } => ::core::mem::drop((__rpc_f0,)),
            Counter::Touch(__rpc_f0) => ::core::mem::drop((__rpc_f0,)),
            Counter::Reset => {}
        }
    }
};
#[doc(hidden)]
#[allow(dead_code, clippy::unnecessary_cast, clippy::cast_lossless)]
impl Counter {
    const __RPC_LIMIT_2: u64 = ::ferry_rpc::__private::limit((MAX_NAME) as i128);
    const __RPC_Q_0: usize = ::ferry_rpc::__private::args_slot(
        ::core::mem::size_of::<u64>(),
    );
    const __RPC_R_0: usize = ::ferry_rpc::__private::reply_slot(
        ::core::mem::size_of::<u64>(),
    );
    const __RPC_CALL_0: ::ferry_rpc::__private::Call<
        { Self::__RPC_Q_0 },
        { Self::__RPC_R_0 },
    > = ::ferry_rpc::__private::Call::new(0xe06cac36u32);
    const __RPC_Q_1: usize = ::ferry_rpc::__private::args_slot(
        ::core::mem::size_of::<u32>(),
    );
    const __RPC_R_1: usize = ::ferry_rpc::__private::reply_slot(
        ::ferry_rpc::__private::tagged::<u64, StoreError>(),
    );
    const __RPC_CALL_1: ::ferry_rpc::__private::Call<
        { Self::__RPC_Q_1 },
        { Self::__RPC_R_1 },
    > = ::ferry_rpc::__private::Call::new(0xeb709090u32);
    const __RPC_Q_2: usize = ::ferry_rpc::__private::args_slot(
        ::core::mem::size_of::<u32>(),
    );
    const __RPC_R_2: usize = ::ferry_rpc::__private::reply_slot(
        ::ferry_rpc::__private::tagged::<(), StoreError>(),
    );
    const __RPC_CALL_2: ::ferry_rpc::__private::Call<
        { Self::__RPC_Q_2 },
        { Self::__RPC_R_2 },
    > = ::ferry_rpc::__private::Call::new(0x8a8506d8u32);
    const __RPC_Q_3: usize = ::ferry_rpc::__private::args_slot(
        ::core::mem::size_of::<u32>(),
    );
    const __RPC_R_3: usize = 0usize;
    const __RPC_CALL_3: ::ferry_rpc::__private::Call<
        { Self::__RPC_Q_3 },
        { Self::__RPC_R_3 },
    > = ::ferry_rpc::__private::Call::new(0xb61020fau32);
    const __RPC_Q_4: usize = ::ferry_rpc::__private::args_slot(0usize);
    const __RPC_R_4: usize = 0usize;
    const __RPC_CALL_4: ::ferry_rpc::__private::Call<
        { Self::__RPC_Q_4 },
        { Self::__RPC_R_4 },
    > = ::ferry_rpc::__private::Call::new(0x00000007u32);
}
impl Counter {
    /// This call's opcode.
    #[allow(deprecated)]
    pub const fn opcode(&self) -> u32 {
        match self {
            Self::Add { .. } => 0xe06cac36u32,
            Self::Put { .. } => 0xeb709090u32,
            Self::Name { .. } => 0x8a8506d8u32,
            Self::Touch(..) => 0xb61020fau32,
            Self::Reset => 0x00000007u32,
        }
    }
    /// The schema fingerprint (`ferry_rpc::service::Service::FINGERPRINT`).
    pub const FINGERPRINT: u64 = <Self as ::ferry_rpc::service::Service>::FINGERPRINT;
    /// The service's name (`ferry_rpc::service::Service::NAME`).
    pub const NAME: &'static str = "counter";
    ///The opcode of call `Add`.
    pub const OPCODE_ADD: u32 = 0xe06cac36u32;
    ///The opcode of call `Put`.
    pub const OPCODE_PUT: u32 = 0xeb709090u32;
    ///The opcode of call `Name`.
    pub const OPCODE_NAME: u32 = 0x8a8506d8u32;
    ///The opcode of call `Touch`.
    pub const OPCODE_TOUCH: u32 = 0xb61020fau32;
    ///The opcode of call `Reset`.
    pub const OPCODE_RESET: u32 = 0x00000007u32;
    /// This service served by `handler` (any type implementing its server trait): what a
    /// transport's server serves; `.and(Other::server(h))` serves another beside it.
    pub fn server<__RpcH: CounterServer>(
        handler: __RpcH,
    ) -> ::ferry_rpc::service::Serving<Self, __RpcH> {
        ::ferry_rpc::service::Serving::new(handler)
    }
    /// The client of this service over `site` (a call site of any transport).
    pub fn client<__RpcS: ::ferry_rpc::service::Site>(
        site: __RpcS,
    ) -> CounterClient<__RpcS> {
        CounterClient(::ferry_rpc::__private::Calls::new(site))
    }
    ::ferry_rpc::__rpc_if_std! {
        #[doc =
        r" This service served by an async `handler` (any type implementing its async"]
        #[doc =
        r" server trait), its tasks spawned by `spawn` (`|task| { tokio::spawn(task); }`):"]
        #[doc = r" what a transport's server serves, as [`server`](Self::server)'s."] pub
        fn async_server < __RpcH : CounterAsyncServer > (handler : __RpcH, spawn : impl
        ::ferry_rpc::service::Spawn,) -> ::ferry_rpc::service::AsyncServing < Self,
        __RpcH > { ::ferry_rpc::service::AsyncServing::new(handler, spawn) }
    }
    /// The async client of this service over `site` (a transport on which a caller
    /// waits without holding a thread: `ferry_shm::ShmClient`).
    pub fn async_client<__RpcS: ::ferry_rpc::service::AsyncSite>(
        site: __RpcS,
    ) -> CounterAsyncClient<__RpcS> {
        CounterAsyncClient(::ferry_rpc::__private::Calls::new(site))
    }
    /// Serves the call on `port`, a port a server just opened, with `handler`; `buffers`
    /// receives streamed arguments (`Vec::new()` with `alloc`). What was served, or the
    /// protocol error (see `ferry_rpc::service::Dispatch::dispatch`).
    #[inline]
    pub fn dispatch<__RpcH: CounterServer + ?::core::marker::Sized>(
        handler: &__RpcH,
        port: &mut impl ::ferry_rpc::service::ServerPort,
        buffers: &mut impl ::ferry_rpc::service::LaneBuffers,
    ) -> ::core::result::Result<::ferry_rpc::service::Served, ::ferry_rpc::Error> {
        port.dispatch::<Self, __RpcH>(handler, buffers)
    }
    /// Serves one call if a client is waiting: opens a port, [`dispatch`](Self::dispatch)es
    /// it and closes it. `Ok(None)` when no call was pending.
    pub fn serve_one<__RpcH: CounterServer + ?::core::marker::Sized>(
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
impl<
    __RpcH: CounterServer + ?::core::marker::Sized,
> ::ferry_rpc::service::Dispatch<__RpcH> for Counter {
    #[inline]
    fn has_opcode(opcode: u32) -> bool {
        ::core::matches!(
            opcode, 0xe06cac36u32 | 0xeb709090u32 | 0x8a8506d8u32 | 0xb61020fau32 |
            0x00000007u32
        )
    }
    #[inline]
    fn serve<'__rpc_v, __RpcV: ::ferry_rpc::__private::Via<'__rpc_v>>(
        handler: &'__rpc_v __RpcH,
        opcode: u32,
        via: __RpcV,
    ) -> __RpcV::Out {
        match opcode {
            0xe06cac36u32 => {
                via.fixed(
                    Counter::__RPC_CALL_0,
                    ::ferry_rpc::__rpc_infallible!(u64),
                    ::ferry_rpc::__private::args::<(u64,)>,
                    |(__rpc_arg0,), __rpc_out| ::ferry_rpc::__private::put(
                        __rpc_out,
                        0,
                        &<__RpcH as CounterServer>::add(handler, __rpc_arg0),
                    ),
                )
            }
            0xeb709090u32 => {
                via.in_place(
                    Counter::__RPC_CALL_1,
                    false,
                    ::core::option::Option::Some(65536u64),
                    ::ferry_rpc::__private::args::<(u32,)>,
                    |(__rpc_arg0,), __rpc_body| <__RpcH as CounterServer>::put(
                        handler,
                        __rpc_arg0,
                        __rpc_body,
                    ),
                    |__rpc_reply, __rpc_out| ::ferry_rpc::__private::put_result(
                        __rpc_out,
                        __rpc_reply,
                    ),
                )
            }
            0x8a8506d8u32 => {
                via.copied(
                    Counter::__RPC_CALL_2,
                    false,
                    ::core::option::Option::None,
                    false,
                    ::ferry_rpc::__private::args::<(u32,)>,
                    |(__rpc_arg0,), _| <__RpcH as CounterServer>::name(
                        handler,
                        __rpc_arg0,
                    ),
                    |__rpc_port, __rpc_replies| ::ferry_rpc::__private::send_stream_replies_tagged::<
                        { 1 + ::core::mem::size_of::<StoreError>() },
                        _,
                        _,
                        _,
                    >(
                        __rpc_port,
                        __rpc_replies,
                        |v| ::core::convert::AsRef::<str>::as_ref(v).as_bytes(),
                    ),
                )
            }
            0xb61020fau32 => {
                via.fixed(
                    Counter::__RPC_CALL_3,
                    ::ferry_rpc::__rpc_infallible!(u32),
                    ::ferry_rpc::__private::args::<(u32,)>,
                    |(__rpc_arg0,), __rpc_out| ::ferry_rpc::__private::put(
                        __rpc_out,
                        0,
                        &<__RpcH as CounterServer>::touch(handler, __rpc_arg0),
                    ),
                )
            }
            0x00000007u32 => {
                via.in_place(
                    Counter::__RPC_CALL_4,
                    true,
                    ::core::option::Option::None,
                    ::ferry_rpc::__private::args::<()>,
                    |(), _| <__RpcH as CounterServer>::reset(handler),
                    |__rpc_reply, __rpc_out| {
                        let _ = (__rpc_reply, __rpc_out);
                    },
                )
            }
            ::ferry_rpc::service::HANDSHAKE => {
                via.handshake(<Counter as ::ferry_rpc::service::Service>::FINGERPRINT)
            }
            _ => via.unknown(),
        }
    }
}
impl ::ferry_rpc::service::Service for Counter {
    const NAME: &'static str = "counter";
    const FINGERPRINT: u64 = ::ferry_rpc::service::Fingerprint::of(
        "counter",
        <Self as ::ferry_rpc::service::Service>::CALLS,
    );
    const OPCODES: &'static [u32] = &[
        0xe06cac36u32, 0xeb709090u32, 0x8a8506d8u32, 0xb61020fau32, 0x00000007u32,
    ];
    const CALLS: &'static [::ferry_rpc::service::CallInfo] = &[
        ::ferry_rpc::service::CallInfo::new("Add", "add", 0xe06cac36u32)
            .args(&[::ferry_rpc::service::ArgInfo::of::<u64>("n", "u64")])
            .reply_of::<u64>("u64"),
        ::ferry_rpc::service::CallInfo::new("Put", "put", 0xeb709090u32)
            .args(
                &[
                    ::ferry_rpc::service::ArgInfo::of::<u32>("key", "u32"),
                    ::ferry_rpc::service::ArgInfo::bytes("value"),
                ],
            )
            .reply_of::<u64>("u64")
            .error_of::<StoreError>("StoreError"),
        ::ferry_rpc::service::CallInfo::new("Name", "name", 0x8a8506d8u32)
            .args(&[::ferry_rpc::service::ArgInfo::of::<u32>("key", "u32")])
            .reply("Text", ::ferry_rpc::service::Shape::Text)
            .error_of::<StoreError>("StoreError"),
        ::ferry_rpc::service::CallInfo::new("Touch", "touch", 0xb61020fau32)
            .args(&[::ferry_rpc::service::ArgInfo::of::<u32>("arg0", "u32")]),
        ::ferry_rpc::service::CallInfo::new("Reset", "reset", 0x00000007u32).oneway(),
    ];
}
/**The client of service `counter`: one method per call of [`Counter`], made through any call site (`Counter::client(&site)`: a client process in-process or on a GPU warp, a shared-memory client between processes).

On a GPU every active lane calls a method together with the others, each with its own arguments, and gets its own reply. A server that does not know a call answers with an error instead of leaving the caller waiting.*/
#[derive(Clone, Copy, Debug)]
pub struct CounterClient<__RpcS>(::ferry_rpc::__private::Calls<__RpcS>);
#[allow(clippy::too_many_arguments)]
impl<__RpcS: ::ferry_rpc::service::Site> CounterClient<__RpcS> {
    /// This client with every call waiting at most `deadline` for the other side (on
    /// transports that keep time: between processes; a bare process waits under its own
    /// wait policy).
    pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
        CounterClient(self.0.with_deadline(deadline))
    }
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    /// Calls `Add` (opcode `0xe06cac36`).
    #[inline]
    pub fn add(
        &self,
        n: u64,
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_0];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &n);
        Counter::__RPC_CALL_0
            .fixed_hot(&self.0, &__rpc_q, ::ferry_rpc::__private::take_value)
    }
    /// Stores bytes under a key; how many are stored now.
    /// Calls `Put` (opcode `0xeb709090`).
    #[inline]
    pub fn put(
        &self,
        key: u32,
        value: &[u8],
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error<StoreError>> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_1];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        Counter::__RPC_CALL_1
            .stream(
                &self.0,
                &__rpc_q,
                value,
                65536u64,
                false,
                ::ferry_rpc::__private::take_result,
            )
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc =
        "As [`put`](Self::put), with `value`'s `len` bytes written by `fill` where they travel: in place in the transport's memory where it carries them there (a shared-memory port's bulk area: no copy), else into a buffer of `len` bytes that is then sent. `fill` gets the `len` bytes to write (their old contents are unspecified) and may be called more than once (when the server has the call go through another path)."]
        pub fn put_with(& self, key : u32, len : usize, mut fill : impl
        ::core::ops::FnMut(& mut [u8]),) -> ::core::result::Result < u64,
        ::ferry_rpc::service::Error < StoreError > > { let mut __rpc_q = [0u8;
        Counter::__RPC_Q_1]; ::ferry_rpc::__private::put(& mut __rpc_q, 0usize, & key);
        const __RPC_R : usize = Counter::__RPC_R_1; ::ferry_rpc::service::Site::call(&
        self.0.site, self.0.deadline, move | __rpc_c | {
        ::ferry_rpc::__private::check_limit(__rpc_c, len, 65536u64)
        .map_err(::ferry_rpc::service::Error::widen) ?;
        ::ferry_rpc::__private::call_stream_with:: < _, { Counter::__RPC_Q_1 }, __RPC_R >
        (__rpc_c, 0xeb709090u32, & __rpc_q, len, & mut fill, false,)
        .map_err(::ferry_rpc::service::Error::widen).and_then(| __rpc_r |
        ::ferry_rpc::__private::take_result(& __rpc_r)) }) }
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " A key's name, as text."] #[doc =
        " Calls `Name` (opcode `0x8a8506d8`)."] pub fn name(& self, key : u32) ->
        ::core::result::Result < ::ferry_rpc::__private::String,
        ::ferry_rpc::service::Error < StoreError > > { let mut __rpc_q = [0u8;
        Counter::__RPC_Q_2]; ::ferry_rpc::__private::put(& mut __rpc_q, 0usize, & key);
        ::ferry_rpc::service::Site::call(& self.0.site, self.0.deadline,
        #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
        move | __rpc_c | { let __rpc_r = ::ferry_rpc::__private::call_vec:: < _, {
        Counter::__RPC_Q_2 } > (__rpc_c, 0x8a8506d8u32, & __rpc_q,
        ::core::option::Option::None, Counter::__RPC_LIMIT_2, true,)
        .map_err(::ferry_rpc::service::Error::widen) ?; let __rpc_b =
        ::ferry_rpc::__private::reply_bytes(__rpc_r) ?;
        ::ferry_rpc::__private::string(__rpc_b) },) }
    }
    ///As [`name`](Self::name), the reply written into `out` (no allocation): a reply longer than `out` is `Status::ReplyTooLarge`, and the port is left at rest.
    pub fn name_into<'__rpc_b>(
        &self,
        key: u32,
        __rpc_out: &'__rpc_b mut [u8],
    ) -> ::core::result::Result<&'__rpc_b str, ::ferry_rpc::service::Error<StoreError>> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_2];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        Counter::__RPC_CALL_2
            .into(
                &self.0,
                &__rpc_q,
                ::core::option::Option::None,
                __rpc_out,
                Counter::__RPC_LIMIT_2,
                ::ferry_rpc::__private::reply_bytes,
                ::ferry_rpc::__private::text_in,
            )
    }
    /// Touches a key; replies `()`.
    /// Calls `Touch` (opcode `0xb61020fa`).
    #[inline]
    pub fn touch(
        &self,
        arg0: u32,
    ) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_3];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &arg0);
        Counter::__RPC_CALL_3
            .fixed(&self.0, &__rpc_q, ::ferry_rpc::__private::take_value)
    }
    /// Resets; the client does not wait.
    /// Calls `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it).
    pub fn reset(&self) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_4];
        Counter::__RPC_CALL_4.oneway(&self.0, &__rpc_q, false)
    }
}
/**The async client of service `counter`: one `async fn` per call of [`Counter`], made through a transport on which a caller waits without holding a thread (`Counter::async_client(&shm)` over a `ferry_shm::ShmClient`: its server wakes the waiting task). Its futures are `Send`; a call dropped before its reply gives its port up to the server, which answers it and takes the port back.

Calls whose request and reply travel in one exchange (fixed arguments and reply, or a streamed argument and a fixed reply) are awaited in place; a one-way call and a call with a streamed reply are made as [`CounterClient`] makes them, where the transport runs blocking calls (a helper thread, for `ferry_shm`).*/
#[derive(Clone, Copy, Debug)]
pub struct CounterAsyncClient<__RpcS>(::ferry_rpc::__private::Calls<__RpcS>);
#[allow(clippy::too_many_arguments)]
impl<__RpcS: ::ferry_rpc::service::AsyncSite> CounterAsyncClient<__RpcS> {
    /// This client with every call waiting at most `deadline` for the other side.
    pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
        CounterAsyncClient(self.0.with_deadline(deadline))
    }
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    /// Calls `Add` (opcode `0xe06cac36`).
    pub async fn add(
        &self,
        n: u64,
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_0];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &n);
        Counter::__RPC_CALL_0
            .fixed_async(&self.0, __rpc_q, ::ferry_rpc::__private::take_value)
            .await
    }
    /// Stores bytes under a key; how many are stored now.
    /// Calls `Put` (opcode `0xeb709090`).
    pub async fn put(
        &self,
        key: u32,
        value: &[u8],
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error<StoreError>> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_1];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        Counter::__RPC_CALL_1
            .stream_async(
                &self.0,
                __rpc_q,
                value,
                65536u64,
                ::ferry_rpc::__private::take_result,
            )
            .await
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " A key's name, as text."] #[doc =
        " Calls `Name` (opcode `0x8a8506d8`)."] pub async fn name(& self, key : u32) ->
        ::core::result::Result < ::ferry_rpc::__private::String,
        ::ferry_rpc::service::Error < StoreError > > {
        ::ferry_rpc::service::AsyncSite::blocking(& self.0.site, self.0.deadline, move |
        __rpc_s, __rpc_d | { let __rpc_c = Counter::client(__rpc_s); let __rpc_c = match
        __rpc_d { ::core::option::Option::Some(d) => __rpc_c.with_deadline(d),
        ::core::option::Option::None => __rpc_c, }; CounterClient::name(& __rpc_c, key)
        }). await }
    }
    /// Touches a key; replies `()`.
    /// Calls `Touch` (opcode `0xb61020fa`).
    pub async fn touch(
        &self,
        arg0: u32,
    ) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        let mut __rpc_q = [0u8; Counter::__RPC_Q_3];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &arg0);
        Counter::__RPC_CALL_3
            .fixed_async(&self.0, __rpc_q, ::ferry_rpc::__private::take_value)
            .await
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " Resets; the client does not wait."] #[doc =
        " Calls `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it)."]
        pub async fn reset(& self) -> ::core::result::Result < (),
        ::ferry_rpc::service::Error > { ::ferry_rpc::service::AsyncSite::blocking(& self
        .0.site, self.0.deadline, move | __rpc_s, __rpc_d | { let __rpc_c =
        Counter::client(__rpc_s); let __rpc_c = match __rpc_d {
        ::core::option::Option::Some(d) => __rpc_c.with_deadline(d),
        ::core::option::Option::None => __rpc_c, }; CounterClient::reset(& __rpc_c,) }).
        await }
    }
}
/**The server side of service `counter`: one handler per call of [`Counter`]. Serve it with [`Counter::dispatch`] (or a transport's server).

A handler runs once for each active lane of a call, in lane order (a host server handles every lane of a GPU warp's call). Handlers take `&self`, so several server threads may share one service; the trait has nothing but the handlers, so a handler is tested by calling it.*/
#[allow(clippy::too_many_arguments)]
pub trait CounterServer {
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    /// Serves `Add` (opcode `0xe06cac36`).
    fn add(&self, n: u64) -> u64;
    /// Stores bytes under a key; how many are stored now.
    /// Serves `Put` (opcode `0xeb709090`).
    fn put(&self, key: u32, value: &[u8]) -> ::core::result::Result<u64, StoreError>;
    /// A key's name, as text.
    /// Serves `Name` (opcode `0x8a8506d8`).
    fn name(
        &self,
        key: u32,
    ) -> ::core::result::Result<impl ::core::convert::AsRef<str>, StoreError>;
    /// Touches a key; replies `()`.
    /// Serves `Touch` (opcode `0xb61020fa`).
    fn touch(&self, arg0: u32);
    /// Resets; the client does not wait.
    /// Serves `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it).
    fn reset(&self);
}
::ferry_rpc::__rpc_if_std! {
    #[doc =
    "The async server side of service `counter`: one handler per call of [`Counter`], each an `async fn` (write `async fn` in the impl). Serve it with `Counter::async_server(handler, spawn)`: the calls that come inline (fixed arguments and reply, or a `Bytes` argument and a fixed reply) run as tasks of the executor that `spawn` spawns on, holding no server thread while they wait; the others (streamed replies, one-way calls, text arguments) run to their end on a server thread."]
    #[allow(clippy::too_many_arguments)] pub trait CounterAsyncServer :
    ::core::marker::Send + ::core::marker::Sync + 'static { #[doc =
    " Adds `n`; returns the new total. Compiled where it is called (`hot`)."] #[doc =
    " Serves `Add` (opcode `0xe06cac36`)."] fn add(& self, n : u64) -> impl
    ::core::future::Future < Output = u64 > + ::core::marker::Send; #[doc =
    " Stores bytes under a key; how many are stored now."] #[doc =
    " Serves `Put` (opcode `0xeb709090`)."] fn put(& self, key : u32, value : & [u8]) ->
    impl ::core::future::Future < Output = ::core::result::Result < u64, StoreError > > +
    ::core::marker::Send; #[doc = " A key's name, as text."] #[doc =
    " Serves `Name` (opcode `0x8a8506d8`)."] fn name(& self, key : u32) -> impl
    ::core::future::Future < Output = ::core::result::Result <
    ::ferry_rpc::__private::String, StoreError > > + ::core::marker::Send; #[doc =
    " Touches a key; replies `()`."] #[doc = " Serves `Touch` (opcode `0xb61020fa`)."] fn
    touch(& self, arg0 : u32) -> impl ::core::future::Future < Output = () > +
    ::core::marker::Send; #[doc = " Resets; the client does not wait."] #[doc =
    " Serves `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it)."]
    fn reset(& self) -> impl ::core::future::Future < Output = () > +
    ::core::marker::Send; } #[allow(clippy::too_many_arguments)] impl < __RpcH :
    CounterAsyncServer > CounterServer for ::ferry_rpc::service::BlockOn < __RpcH > { fn
    add(& self, n : u64) -> u64 { let __rpc_h = ::ferry_rpc::__private::Arc::clone(self
    .handler()); self.run(async move { < __RpcH as CounterAsyncServer > ::add(& *
    __rpc_h, n). await }) } fn put(& self, key : u32, value : & [u8]) ->
    ::core::result::Result < u64, StoreError > { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); let value :
    ::ferry_rpc::__private::Vec < u8 > = value.into(); self.run(async move { < __RpcH as
    CounterAsyncServer > ::put(& * __rpc_h, key, & value). await }) } fn name(& self, key
    : u32) -> ::core::result::Result < impl ::core::convert::AsRef < str >, StoreError >
    { let __rpc_h = ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async
    move { < __RpcH as CounterAsyncServer > ::name(& * __rpc_h, key). await }) } fn
    touch(& self, arg0 : u32) { let __rpc_h = ::ferry_rpc::__private::Arc::clone(self
    .handler()); self.run(async move { < __RpcH as CounterAsyncServer > ::touch(& *
    __rpc_h, arg0). await }) } fn reset(& self) { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async move { < __RpcH as
    CounterAsyncServer > ::reset(& * __rpc_h,). await }) } } impl < __RpcH :
    CounterAsyncServer > ::ferry_rpc::service::DispatchLater < __RpcH > for Counter { fn
    dispatch_later(handler : & ::ferry_rpc::service::BlockOn < __RpcH >, opcode : u32,
    request : & [u8], body : & [u8], later : ::ferry_rpc::__private::Box < dyn
    ::ferry_rpc::service::Later >,) -> ::core::result::Result < (),
    ::ferry_rpc::__private::Box < dyn ::ferry_rpc::service::Later >> { let _ = (handler,
    request, body); match opcode { 0xe06cac36u32 => ::ferry_rpc::__private::later_fixed::
    < { Counter::__RPC_Q_0 }, { Counter::__RPC_R_0 }, _ > (::core::option::Option::None,
    request, body, later, ::ferry_rpc::__private::args:: < (u64,) >, | (__rpc_arg0,), _,
    later | { let __rpc_h = ::ferry_rpc::__private::Arc::clone(handler.handler());
    handler.spawner().spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_0 } >
    (later, async move { #[allow(clippy::let_unit_value)] let __rpc_reply = < __RpcH as
    CounterAsyncServer > ::add(& * __rpc_h, __rpc_arg0). await; let mut __rpc_buf = [0u8;
    Counter::__RPC_R_0]; ::ferry_rpc::__private::put(& mut __rpc_buf, 0, & __rpc_reply);
    __rpc_buf })); },), 0xeb709090u32 => ::ferry_rpc::__private::later_fixed:: < {
    Counter::__RPC_Q_1 }, { Counter::__RPC_R_1 }, _ >
    (::core::option::Option::Some(65536u64), request, body, later,
    ::ferry_rpc::__private::args:: < (u32,) >, | (__rpc_arg0,), __rpc_body, later | { let
    __rpc_body : ::ferry_rpc::__private::Vec < u8 > = __rpc_body.into(); let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(handler.handler()); handler.spawner()
    .spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_1 } > (later, async move {
    #[allow(clippy::let_unit_value)] let __rpc_reply = < __RpcH as CounterAsyncServer >
    ::put(& * __rpc_h, __rpc_arg0, & __rpc_body). await; let mut __rpc_buf = [0u8;
    Counter::__RPC_R_1]; ::ferry_rpc::__private::put_result(& mut __rpc_buf, &
    __rpc_reply); __rpc_buf })); },), 0xb61020fau32 =>
    ::ferry_rpc::__private::later_fixed:: < { Counter::__RPC_Q_3 }, { Counter::__RPC_R_3
    }, _ > (::core::option::Option::None, request, body, later,
    ::ferry_rpc::__private::args:: < (u32,) >, | (__rpc_arg0,), _, later | { let __rpc_h
    = ::ferry_rpc::__private::Arc::clone(handler.handler()); handler.spawner()
    .spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_3 } > (later, async move {
    #[allow(clippy::let_unit_value)] let __rpc_reply = < __RpcH as CounterAsyncServer >
    ::touch(& * __rpc_h, __rpc_arg0). await; let mut __rpc_buf = [0u8;
    Counter::__RPC_R_3]; ::ferry_rpc::__private::put(& mut __rpc_buf, 0, & __rpc_reply);
    __rpc_buf })); },), _ => ::core::result::Result::Err(later), } } }
}

const _: () = {
    ::core::assert!(
        ::ferry_rpc::service::name_fits("counter"),
        "service name `counter` is longer than the 48 bytes (or empty) that transports' tables of served services hold: give a shorter `#[rpc(service = \"...\")]`"
    );
    #[allow(dead_code)]
    fn __rpc_assert_wire<T>()
    where
        T: ::ferry_rpc::__private::zerocopy::IntoBytes
            + ::ferry_rpc::__private::zerocopy::TryFromBytes
            + ::ferry_rpc::__private::zerocopy::Immutable,
    {}
    #[allow(dead_code)]
    fn __rpc_assert_all() {
        __rpc_assert_wire::<u64>();
        __rpc_assert_wire::<u64>();
        __rpc_assert_wire::<u32>();
        __rpc_assert_wire::<u64>();
        __rpc_assert_wire::<StoreError>();
        let _: ::core::marker::PhantomData<::ferry_rpc::service::Bytes> = ::core::marker::PhantomData::<
            Bytes,
        >;
        __rpc_assert_wire::<u32>();
        __rpc_assert_wire::<StoreError>();
        let _: ::core::marker::PhantomData<::ferry_rpc::service::Text> = ::core::marker::PhantomData::<
            Text,
        >;
        __rpc_assert_wire::<u32>();
    }
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(0usize + ::core::mem::size_of:: < u64 > ()),
        "the fixed arguments of call `Add` take more than a 64-byte slot: make them smaller, or send the data as a `Bytes` argument"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(::core::mem::size_of:: < u64 > ()),
        "the reply of call `Add` (its value) takes more than a 64-byte slot: make it smaller, or reply `Bytes`"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(0usize + ::core::mem::size_of:: < u32 > ()),
        "the fixed arguments of call `Put` take more than a 64-byte slot: make them smaller, or send the data as a `Bytes` argument"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(1usize +
        ::ferry_rpc::__private::max(::core::mem::size_of:: < u64 > (),
        ::core::mem::size_of:: < StoreError > ())),
        "the reply of call `Put` (its value, or its error, and a tag byte) takes more than a 64-byte slot: make it smaller, or reply `Bytes`"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(0usize + ::core::mem::size_of:: < u32 > ()),
        "the fixed arguments of call `Name` take more than a 64-byte slot: make them smaller, or send the data as a `Bytes` argument"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(1usize + ::ferry_rpc::__private::max(0usize,
        ::core::mem::size_of:: < StoreError > ())),
        "the reply of call `Name` (its value, or its error, and a tag byte) takes more than a 64-byte slot: make it smaller, or reply `Bytes`"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(0usize + ::core::mem::size_of:: < u32 > ()),
        "the fixed arguments of call `Touch` take more than a 64-byte slot: make them smaller, or send the data as a `Bytes` argument"
    );
    ::core::assert!(
        ::ferry_rpc::__private::fits_slot(0usize),
        "the fixed arguments of call `Reset` take more than a 64-byte slot: make them smaller, or send the data as a `Bytes` argument"
    );
    #[allow(dead_code, unreachable_code, clippy::diverging_sub_expression)]
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
    #[allow(dead_code)]
    fn __rpc_read(call: &Counter) {
        match call {
            Counter::Add { n: __rpc_f0 } => {
                let _ = (__rpc_f0,);
            }
            Counter::Put { key: __rpc_f0, value: __rpc_f1 } => {
                let _ = (__rpc_f0, __rpc_f1);
            }
            Counter::Name { key: __rpc_f0 } => {
                let _ = (__rpc_f0,);
            }
            Counter::Touch(__rpc_f0) => {
                let _ = (__rpc_f0,);
            }
            Counter::Reset => {}
        }
    }
};
impl Counter {
    #[doc(hidden)]
    #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
    const __RPC_LIMIT_2: u64 = {
        let limit = (MAX_NAME) as i128;
        ::core::assert!(
            limit >= 0 && limit <= u64::MAX as i128,
            "a call's `limit` is a number of bytes: an integer from 0 to u64::MAX"
        );
        limit as u64
    };
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_Q_0: usize = 0usize + ::core::mem::size_of::<u64>();
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_R_0: usize = ::core::mem::size_of::<u64>();
    #[doc(hidden)]
    #[allow(dead_code)]
    #[inline(always)]
    fn __rpc_args_0(__rpc_bytes: &[u8]) -> ::core::option::Option<(u64,)> {
        (|| ::core::option::Option::Some((
            ::ferry_rpc::__private::take::<u64>(__rpc_bytes, 0usize)?,
        )))()
    }
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_Q_1: usize = 0usize + ::core::mem::size_of::<u32>();
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_R_1: usize = 1usize
        + ::ferry_rpc::__private::max(
            ::core::mem::size_of::<u64>(),
            ::core::mem::size_of::<StoreError>(),
        );
    #[doc(hidden)]
    #[allow(dead_code)]
    #[inline(always)]
    fn __rpc_args_1(__rpc_bytes: &[u8]) -> ::core::option::Option<(u32,)> {
        (|| ::core::option::Option::Some((
            ::ferry_rpc::__private::take::<u32>(__rpc_bytes, 0usize)?,
        )))()
    }
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_Q_2: usize = 0usize + ::core::mem::size_of::<u32>();
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_R_2: usize = 1usize
        + ::ferry_rpc::__private::max(0usize, ::core::mem::size_of::<StoreError>());
    #[doc(hidden)]
    #[allow(dead_code)]
    #[inline(always)]
    fn __rpc_args_2(__rpc_bytes: &[u8]) -> ::core::option::Option<(u32,)> {
        (|| ::core::option::Option::Some((
            ::ferry_rpc::__private::take::<u32>(__rpc_bytes, 0usize)?,
        )))()
    }
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_Q_3: usize = 0usize + ::core::mem::size_of::<u32>();
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_R_3: usize = 0usize;
    #[doc(hidden)]
    #[allow(dead_code)]
    #[inline(always)]
    fn __rpc_args_3(__rpc_bytes: &[u8]) -> ::core::option::Option<(u32,)> {
        (|| ::core::option::Option::Some((
            ::ferry_rpc::__private::take::<u32>(__rpc_bytes, 0usize)?,
        )))()
    }
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_Q_4: usize = 0usize;
    #[doc(hidden)]
    #[allow(dead_code)]
    const __RPC_R_4: usize = 0usize;
    #[doc(hidden)]
    #[allow(dead_code)]
    #[inline(always)]
    fn __rpc_args_4(__rpc_bytes: &[u8]) -> ::core::option::Option<()> {
        (|| ::core::option::Option::Some(()))()
    }
    /// This call's opcode.
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
        CounterClient {
            site,
            deadline: ::core::option::Option::None,
        }
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
        CounterAsyncClient {
            site,
            deadline: ::core::option::Option::None,
        }
    }
    /// Serves the call on `port`, a port a server just opened: reads the opcode, decodes
    /// each lane's arguments, calls the handler once per lane, and replies. A call the
    /// service does not have gets `status::UNKNOWN_OPCODE` back; arguments that do not
    /// decode, `status::BAD_REQUEST`; a streamed argument longer than the call's `limit`
    /// (or than `buffers` take), `status::REJECTED`: in each case no handler runs. The
    /// handshake opcode is answered with this service's fingerprint. `buffers` receives
    /// streamed arguments (`Vec::new()` with `alloc`).
    ///
    /// Returns what was served, or the protocol error (the client stalled).
    #[inline]
    pub fn dispatch<__RpcH, __RpcL, __RpcM, __RpcW, __RpcB>(
        handler: &__RpcH,
        port: &mut ::ferry_rpc::Port<
            '_,
            '_,
            ::ferry_rpc::Server,
            __RpcL,
            __RpcM,
            __RpcW,
        >,
        buffers: &mut __RpcB,
    ) -> ::core::result::Result<::ferry_rpc::service::Served, ::ferry_rpc::Error>
    where
        __RpcH: CounterServer + ?::core::marker::Sized,
        __RpcL: ::ferry_rpc::Lanes,
        __RpcM: ::ferry_rpc::Mailbox,
        __RpcW: ::ferry_rpc::Wait,
        __RpcB: ::ferry_rpc::service::LaneBuffers,
    {
        <Self as ::ferry_rpc::service::Dispatch<
            __RpcH,
        >>::dispatch(handler, port, buffers)
    }
    /// Serves a call that came through a transport's inline path
    /// (`ferry_rpc::service::InlineCall`) rather than a port: decodes `request` (and
    /// `body`, the streamed argument of a call that has one, read where it lies; empty
    /// for the others), calls the handler, writes its reply at the start of `reply` and
    /// returns the status to send back with the reply's length in bytes
    /// (`status::BAD_REQUEST` for arguments that do not decode or a body the call does
    /// not take, `status::REJECTED` for a body over the call's limit,
    /// `status::UNKNOWN_OPCODE` for a call the service does not have, all with no reply
    /// bytes). `None` for a call that cannot travel inline (a streamed reply, a one-way
    /// call, arguments or a reply over `INLINE_BYTES`): the transport tells the client to
    /// use a port.
    #[inline]
    pub fn dispatch_inline<__RpcH: CounterServer + ?::core::marker::Sized>(
        handler: &__RpcH,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; ::ferry_rpc::service::INLINE_BYTES],
    ) -> ::core::option::Option<(u32, usize)> {
        <Self as ::ferry_rpc::service::Dispatch<
            __RpcH,
        >>::dispatch_inline(handler, opcode, request, body, reply)
    }
    /// Serves every lane of a call that came on a GPU's word lines
    /// (`ferry_rpc::words`) at once, as [`dispatch_inline`](Self::dispatch_inline) serves
    /// one: the opcode is decoded once and each lane's arguments decoded and its handler
    /// called in one loop. A call that cannot travel on a word line (a streamed argument
    /// or reply, arguments or a reply over `ferry_rpc::words::WORD_BYTES`) and the
    /// handshake are declined on every lane (the client uses a port); a call the service
    /// does not have gets `status::UNKNOWN_OPCODE`.
    #[inline]
    pub fn dispatch_inline_lanes<__RpcH: CounterServer + ?::core::marker::Sized>(
        handler: &__RpcH,
        opcode: u32,
        lanes: &mut ::ferry_rpc::service::InlineLanes<'_>,
    ) {
        <Self as ::ferry_rpc::service::Dispatch<
            __RpcH,
        >>::dispatch_inline_lanes(handler, opcode, lanes)
    }
    /// Serves one call if a client is waiting: opens a port, [`dispatch`](Self::dispatch)es
    /// it and closes it. `Ok(None)` when no call was pending.
    pub fn serve_one<__RpcH, __RpcL, __RpcM, __RpcW, __RpcB>(
        handler: &__RpcH,
        server: &::ferry_rpc::Process<'_, ::ferry_rpc::Server, __RpcL, __RpcM, __RpcW>,
        buffers: &mut __RpcB,
    ) -> ::core::result::Result<
        ::core::option::Option<::ferry_rpc::service::Served>,
        ::ferry_rpc::Error,
    >
    where
        __RpcH: CounterServer + ?::core::marker::Sized,
        __RpcL: ::ferry_rpc::Lanes,
        __RpcM: ::ferry_rpc::Mailbox,
        __RpcW: ::ferry_rpc::Wait,
        __RpcB: ::ferry_rpc::service::LaneBuffers,
    {
        match server.try_open(()) {
            ::core::option::Option::Some(mut port) => {
                Self::dispatch(handler, &mut port, buffers)
                    .map(::core::option::Option::Some)
            }
            ::core::option::Option::None => {
                ::core::result::Result::Ok(::core::option::Option::None)
            }
        }
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
                via.fixed::<
                        { Counter::__RPC_Q_0 },
                        { Counter::__RPC_R_0 },
                        _,
                    >(
                    0xe06cac36u32,
                    {
                        #[allow(unused_imports)]
                        use ::ferry_rpc::__private::{IsFallible as _, IsInfallible as _};
                        true
                            && (&::ferry_rpc::__private::Infallible::<u64>::new())
                                .infallible()
                    },
                    Counter::__rpc_args_0,
                    |(__rpc_arg0,), __rpc_out| ::ferry_rpc::__private::put(
                        __rpc_out,
                        0,
                        &<__RpcH as CounterServer>::add(handler, __rpc_arg0),
                    ),
                )
            }
            0xeb709090u32 => {
                via.in_place::<
                        { Counter::__RPC_Q_1 },
                        { Counter::__RPC_R_1 },
                        _,
                        _,
                    >(
                    0xeb709090u32,
                    false,
                    ::core::option::Option::Some(65536u64),
                    Counter::__rpc_args_1,
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
                via.copied::<
                        { Counter::__RPC_Q_2 },
                        _,
                        _,
                    >(
                    0x8a8506d8u32,
                    false,
                    ::core::option::Option::None,
                    false,
                    Counter::__rpc_args_2,
                    |(__rpc_arg0,), _| <__RpcH as CounterServer>::name(
                        handler,
                        __rpc_arg0,
                    ),
                    |__rpc_port, __rpc_replies| ::ferry_rpc::__private::send_stream_replies_tagged::<
                        { 1 + ::core::mem::size_of::<StoreError>() },
                        _,
                        _,
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
                via.fixed::<
                        { Counter::__RPC_Q_3 },
                        { Counter::__RPC_R_3 },
                        _,
                    >(
                    0xb61020fau32,
                    {
                        #[allow(unused_imports)]
                        use ::ferry_rpc::__private::{IsFallible as _, IsInfallible as _};
                        true
                            && (&::ferry_rpc::__private::Infallible::<u32>::new())
                                .infallible()
                    },
                    Counter::__rpc_args_3,
                    |(__rpc_arg0,), __rpc_out| ::ferry_rpc::__private::put(
                        __rpc_out,
                        0,
                        &<__RpcH as CounterServer>::touch(handler, __rpc_arg0),
                    ),
                )
            }
            0x00000007u32 => {
                via.in_place::<
                        { Counter::__RPC_Q_4 },
                        { Counter::__RPC_R_4 },
                        _,
                        _,
                    >(
                    0x00000007u32,
                    true,
                    ::core::option::Option::None,
                    Counter::__rpc_args_4,
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
    const FINGERPRINT: u64 = ::ferry_rpc::service::Fingerprint::new("counter")
        .begin_call("Add", 0xe06cac36u32)
        .arg("n", "u64", ::ferry_rpc::service::Shape::of::<u64>())
        .reply("u64", ::ferry_rpc::service::Shape::of::<u64>())
        .begin_call("Put", 0xeb709090u32)
        .arg("key", "u32", ::ferry_rpc::service::Shape::of::<u32>())
        .arg("value", "Bytes", ::ferry_rpc::service::Shape::Bytes)
        .reply("u64", ::ferry_rpc::service::Shape::of::<u64>())
        .error("StoreError", ::ferry_rpc::service::Shape::of::<StoreError>())
        .begin_call("Name", 0x8a8506d8u32)
        .arg("key", "u32", ::ferry_rpc::service::Shape::of::<u32>())
        .reply("Text", ::ferry_rpc::service::Shape::Text)
        .error("StoreError", ::ferry_rpc::service::Shape::of::<StoreError>())
        .begin_call("Touch", 0xb61020fau32)
        .arg("arg0", "u32", ::ferry_rpc::service::Shape::of::<u32>())
        .reply("()", ::ferry_rpc::service::Shape::of::<()>())
        .begin_call("Reset", 0x00000007u32)
        .reply("", ::ferry_rpc::service::Shape::None)
        .finish();
    const OPCODES: &'static [u32] = &[
        0xe06cac36u32, 0xeb709090u32, 0x8a8506d8u32, 0xb61020fau32, 0x00000007u32,
    ];
    const CALLS: &'static [::ferry_rpc::service::CallInfo] = &[
        ::ferry_rpc::service::CallInfo {
            method: "add",
            opcode: 0xe06cac36u32,
            oneway: false,
            args: &[
                ::ferry_rpc::service::ArgInfo {
                    name: "n",
                    ty: "u64",
                    size: ::core::mem::size_of::<u64>(),
                },
            ],
            reply: "u64",
            reply_size: ::core::mem::size_of::<u64>(),
            error: "",
            error_size: 0usize,
        },
        ::ferry_rpc::service::CallInfo {
            method: "put",
            opcode: 0xeb709090u32,
            oneway: false,
            args: &[
                ::ferry_rpc::service::ArgInfo {
                    name: "key",
                    ty: "u32",
                    size: ::core::mem::size_of::<u32>(),
                },
                ::ferry_rpc::service::ArgInfo {
                    name: "value",
                    ty: "Bytes",
                    size: 0usize,
                },
            ],
            reply: "u64",
            reply_size: ::core::mem::size_of::<u64>(),
            error: "StoreError",
            error_size: ::core::mem::size_of::<StoreError>(),
        },
        ::ferry_rpc::service::CallInfo {
            method: "name",
            opcode: 0x8a8506d8u32,
            oneway: false,
            args: &[
                ::ferry_rpc::service::ArgInfo {
                    name: "key",
                    ty: "u32",
                    size: ::core::mem::size_of::<u32>(),
                },
            ],
            reply: "Text",
            reply_size: 0usize,
            error: "StoreError",
            error_size: ::core::mem::size_of::<StoreError>(),
        },
        ::ferry_rpc::service::CallInfo {
            method: "touch",
            opcode: 0xb61020fau32,
            oneway: false,
            args: &[
                ::ferry_rpc::service::ArgInfo {
                    name: "arg0",
                    ty: "u32",
                    size: ::core::mem::size_of::<u32>(),
                },
            ],
            reply: "()",
            reply_size: 0usize,
            error: "",
            error_size: 0usize,
        },
        ::ferry_rpc::service::CallInfo {
            method: "reset",
            opcode: 0x00000007u32,
            oneway: true,
            args: &[],
            reply: "()",
            reply_size: 0usize,
            error: "",
            error_size: 0usize,
        },
    ];
}
/**The client of service `counter`: one method per call of [`Counter`], made through any call site (`Counter::client(&site)`: a client process in-process or on a GPU warp, a shared-memory client between processes).

On a GPU every active lane calls a method together with the others, each with its own arguments, and gets its own reply. A server that does not know a call answers with an error instead of leaving the caller waiting.*/
#[derive(Clone, Copy, Debug)]
pub struct CounterClient<__RpcS> {
    site: __RpcS,
    deadline: ::core::option::Option<::core::time::Duration>,
}
impl<__RpcS: ::ferry_rpc::service::Site> CounterClient<__RpcS> {
    /// This client with every call waiting at most `deadline` for the other side (on
    /// transports that keep time: between processes; a bare process waits under its own
    /// wait policy).
    pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
        CounterClient {
            deadline: ::core::option::Option::Some(deadline),
            ..self
        }
    }
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    ///
    ///Calls `Add` (opcode `0xe06cac36`).
    #[inline]
    pub fn add(
        &self,
        n: u64,
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error> {
        const __RPC_Q: usize = Counter::__RPC_Q_0;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &n);
        const __RPC_R: usize = Counter::__RPC_R_0;
        ::ferry_rpc::service::Site::call(
            &self.site,
            self.deadline,
            #[cfg_attr(
                any(target_arch = "nvptx64", target_arch = "amdgpu"),
                inline(always)
            )]
            move |__rpc_c| {
                let __rpc_r = ::ferry_rpc::__private::call_fixed_hot::<
                    _,
                    __RPC_Q,
                    __RPC_R,
                >(__rpc_c, 0xe06cac36u32, &__rpc_q)
                    .map_err(::ferry_rpc::service::Error::widen)?;
                ::ferry_rpc::__private::take_value(&__rpc_r)
            },
        )
    }
    /// Stores bytes under a key; how many are stored now.
    ///
    ///Calls `Put` (opcode `0xeb709090`).
    #[inline]
    pub fn put(
        &self,
        key: u32,
        value: &[u8],
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error<StoreError>> {
        const __RPC_Q: usize = Counter::__RPC_Q_1;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        const __RPC_R: usize = Counter::__RPC_R_1;
        ::ferry_rpc::service::Site::call(
            &self.site,
            self.deadline,
            #[cfg_attr(
                any(target_arch = "nvptx64", target_arch = "amdgpu"),
                inline(always)
            )]
            move |__rpc_c| {
                ::ferry_rpc::__private::check_limit(__rpc_c, (value).len(), 65536u64)
                    .map_err(::ferry_rpc::service::Error::widen)?;
                let __rpc_r = ::ferry_rpc::__private::call_stream::<
                    _,
                    __RPC_Q,
                    __RPC_R,
                >(__rpc_c, 0xeb709090u32, &__rpc_q, value, false)
                    .map_err(::ferry_rpc::service::Error::widen)?;
                ::ferry_rpc::__private::take_result(&__rpc_r)
            },
        )
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc =
        "As [`put`](Self::put), with `value`'s `len` bytes written by `fill` where they travel: in place in the transport's memory where it carries them there (a shared-memory port's bulk area: no copy), else into a buffer of `len` bytes that is then sent. `fill` gets the `len` bytes to write (their old contents are unspecified) and may be called more than once (when the server has the call go through another path)."]
        pub fn put_with(& self, key : u32, len : usize, mut fill : impl
        ::core::ops::FnMut(& mut [u8]),) -> ::core::result::Result < u64,
        ::ferry_rpc::service::Error < StoreError > > { const __RPC_Q : usize =
        Counter::__RPC_Q_1; let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(& mut __rpc_q, 0usize, & key); const __RPC_R : usize
        = Counter::__RPC_R_1; ::ferry_rpc::service::Site::call(& self.site, self
        .deadline, move | __rpc_c | { ::ferry_rpc::__private::check_limit(__rpc_c, len,
        65536u64).map_err(::ferry_rpc::service::Error::widen) ?;
        ::ferry_rpc::__private::call_stream_with:: < _, __RPC_Q, __RPC_R > (__rpc_c,
        0xeb709090u32, & __rpc_q, len, & mut fill, false,)
        .map_err(::ferry_rpc::service::Error::widen).and_then(| __rpc_r |
        ::ferry_rpc::__private::take_result(& __rpc_r)) }) }
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " A key's name, as text."] #[doc = ""] #[doc =
        "Calls `Name` (opcode `0x8a8506d8`)."] pub fn name(& self, key : u32) ->
        ::core::result::Result < ::ferry_rpc::__private::String,
        ::ferry_rpc::service::Error < StoreError > > { const __RPC_Q : usize =
        Counter::__RPC_Q_2; let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(& mut __rpc_q, 0usize, & key);
        ::ferry_rpc::service::Site::call(& self.site, self.deadline,
        #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
        move | __rpc_c | { let __rpc_r = ::ferry_rpc::__private::call_vec:: < _, __RPC_Q
        > (__rpc_c, 0x8a8506d8u32, & __rpc_q, ::core::option::Option::None,
        Counter::__RPC_LIMIT_2, true,).map_err(::ferry_rpc::service::Error::widen) ?; let
        __rpc_b = ::ferry_rpc::__private::reply_bytes(__rpc_r) ?;
        ::ferry_rpc::__private::string(__rpc_b) },) }
    }
    ///As [`name`](Self::name), the reply written into `out` (no allocation): a reply longer than `out` is `Status::ReplyTooLarge`, and the port is left at rest.
    pub fn name_into<'__rpc_b>(
        &self,
        key: u32,
        __rpc_out: &'__rpc_b mut [u8],
    ) -> ::core::result::Result<&'__rpc_b str, ::ferry_rpc::service::Error<StoreError>> {
        const __RPC_Q: usize = Counter::__RPC_Q_2;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        ::ferry_rpc::service::Site::call(
            &self.site,
            self.deadline,
            #[cfg_attr(
                any(target_arch = "nvptx64", target_arch = "amdgpu"),
                inline(always)
            )]
            move |__rpc_c| {
                let __rpc_r = ::ferry_rpc::__private::call_into::<
                    _,
                    __RPC_Q,
                >(
                        __rpc_c,
                        0x8a8506d8u32,
                        &__rpc_q,
                        ::core::option::Option::None,
                        __rpc_out,
                        Counter::__RPC_LIMIT_2,
                        true,
                    )
                    .map_err(::ferry_rpc::service::Error::widen)?;
                let __rpc_b = ::ferry_rpc::__private::reply_bytes(__rpc_r)?;
                ::ferry_rpc::__private::text(__rpc_b)
            },
        )
    }
    /// Touches a key; replies `()`.
    ///
    ///Calls `Touch` (opcode `0xb61020fa`).
    #[inline]
    pub fn touch(
        &self,
        arg0: u32,
    ) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        const __RPC_Q: usize = Counter::__RPC_Q_3;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &arg0);
        const __RPC_R: usize = Counter::__RPC_R_3;
        ::ferry_rpc::service::Site::call(
            &self.site,
            self.deadline,
            #[cfg_attr(
                any(target_arch = "nvptx64", target_arch = "amdgpu"),
                inline(always)
            )]
            move |__rpc_c| {
                let __rpc_r = ::ferry_rpc::__private::call_fixed::<
                    _,
                    __RPC_Q,
                    __RPC_R,
                >(__rpc_c, 0xb61020fau32, &__rpc_q)
                    .map_err(::ferry_rpc::service::Error::widen)?;
                ::ferry_rpc::__private::take_value(&__rpc_r)
            },
        )
    }
    /// Resets; the client does not wait.
    ///
    ///Calls `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it).
    pub fn reset(&self) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        const __RPC_Q: usize = Counter::__RPC_Q_4;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::service::Site::call(
            &self.site,
            self.deadline,
            #[cfg_attr(
                any(target_arch = "nvptx64", target_arch = "amdgpu"),
                inline(always)
            )]
            move |__rpc_c| {
                ::ferry_rpc::__private::call_oneway::<
                    _,
                    __RPC_Q,
                >(__rpc_c, 0x00000007u32, &__rpc_q)
            },
        )
    }
}
/**The async client of service `counter`: one `async fn` per call of [`Counter`], made through a transport on which a caller waits without holding a thread (`Counter::async_client(&shm)` over a `ferry_shm::ShmClient`: its server wakes the waiting task). Its futures are `Send`; a call dropped before its reply gives its port up to the server, which answers it and takes the port back.

Calls whose request and reply travel in one exchange (fixed arguments and reply, or a streamed argument and a fixed reply) are awaited in place; a one-way call and a call with a streamed reply are made as [`CounterClient`] makes them, where the transport runs blocking calls (a helper thread, for `ferry_shm`).*/
#[derive(Clone, Copy, Debug)]
pub struct CounterAsyncClient<__RpcS> {
    site: __RpcS,
    deadline: ::core::option::Option<::core::time::Duration>,
}
impl<__RpcS: ::ferry_rpc::service::AsyncSite> CounterAsyncClient<__RpcS> {
    /// This client with every call waiting at most `deadline` for the other side.
    pub fn with_deadline(self, deadline: ::core::time::Duration) -> Self {
        CounterAsyncClient {
            deadline: ::core::option::Option::Some(deadline),
            ..self
        }
    }
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    ///
    ///Calls `Add` (opcode `0xe06cac36`).
    pub async fn add(
        &self,
        n: u64,
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error> {
        const __RPC_Q: usize = Counter::__RPC_Q_0;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &n);
        const __RPC_R: usize = Counter::__RPC_R_0;
        let __rpc_r = ::ferry_rpc::service::AsyncSite::call_fixed::<
            __RPC_Q,
            __RPC_R,
        >(&self.site, self.deadline, 0xe06cac36u32, __rpc_q)
            .await
            .map_err(::ferry_rpc::service::Error::widen)?;
        ::ferry_rpc::__private::take_value(&__rpc_r)
    }
    /// Stores bytes under a key; how many are stored now.
    ///
    ///Calls `Put` (opcode `0xeb709090`).
    pub async fn put(
        &self,
        key: u32,
        value: &[u8],
    ) -> ::core::result::Result<u64, ::ferry_rpc::service::Error<StoreError>> {
        ::ferry_rpc::__private::check_limit_len((value).len(), 65536u64)
            .map_err(::ferry_rpc::service::Error::widen)?;
        const __RPC_Q: usize = Counter::__RPC_Q_1;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &key);
        const __RPC_R: usize = Counter::__RPC_R_1;
        let __rpc_r = ::ferry_rpc::service::AsyncSite::call_stream::<
            __RPC_Q,
            __RPC_R,
        >(&self.site, self.deadline, 0xeb709090u32, __rpc_q, value)
            .await
            .map_err(::ferry_rpc::service::Error::widen)?;
        ::ferry_rpc::__private::take_result(&__rpc_r)
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " A key's name, as text."] #[doc = ""] #[doc =
        "Calls `Name` (opcode `0x8a8506d8`)."] pub async fn name(& self, key : u32) ->
        ::core::result::Result < ::ferry_rpc::__private::String,
        ::ferry_rpc::service::Error < StoreError > > {
        ::ferry_rpc::service::AsyncSite::blocking(& self.site, self.deadline, move |
        __rpc_s, __rpc_d | { let __rpc_c = Counter::client(__rpc_s); let __rpc_c = match
        __rpc_d { ::core::option::Option::Some(d) => __rpc_c.with_deadline(d),
        ::core::option::Option::None => __rpc_c, }; __rpc_c.name(key) }). await }
    }
    /// Touches a key; replies `()`.
    ///
    ///Calls `Touch` (opcode `0xb61020fa`).
    pub async fn touch(
        &self,
        arg0: u32,
    ) -> ::core::result::Result<(), ::ferry_rpc::service::Error> {
        const __RPC_Q: usize = Counter::__RPC_Q_3;
        let mut __rpc_q = [0u8; __RPC_Q];
        ::ferry_rpc::__private::put(&mut __rpc_q, 0usize, &arg0);
        const __RPC_R: usize = Counter::__RPC_R_3;
        let __rpc_r = ::ferry_rpc::service::AsyncSite::call_fixed::<
            __RPC_Q,
            __RPC_R,
        >(&self.site, self.deadline, 0xb61020fau32, __rpc_q)
            .await
            .map_err(::ferry_rpc::service::Error::widen)?;
        ::ferry_rpc::__private::take_value(&__rpc_r)
    }
    ::ferry_rpc::__rpc_if_alloc! {
        #[doc = " Resets; the client does not wait."] #[doc = ""] #[doc =
        "Calls `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it)."]
        pub async fn reset(& self) -> ::core::result::Result < (),
        ::ferry_rpc::service::Error > { ::ferry_rpc::service::AsyncSite::blocking(& self
        .site, self.deadline, move | __rpc_s, __rpc_d | { let __rpc_c =
        Counter::client(__rpc_s); let __rpc_c = match __rpc_d {
        ::core::option::Option::Some(d) => __rpc_c.with_deadline(d),
        ::core::option::Option::None => __rpc_c, }; __rpc_c.reset() }). await }
    }
}
/**The server side of service `counter`: one handler per call of [`Counter`]. Serve it with [`Counter::dispatch`] (or a transport's server).

A handler runs once for each active lane of a call, in lane order (a host server handles every lane of a GPU warp's call). Handlers take `&self`, so several server threads may share one service; the trait has nothing but the handlers, so a handler is tested by calling it.*/
pub trait CounterServer {
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    ///
    ///Serves `Add` (opcode `0xe06cac36`).
    fn add(&self, n: u64) -> u64;
    /// Stores bytes under a key; how many are stored now.
    ///
    ///Serves `Put` (opcode `0xeb709090`).
    fn put(&self, key: u32, value: &[u8]) -> ::core::result::Result<u64, StoreError>;
    /// A key's name, as text.
    ///
    ///Serves `Name` (opcode `0x8a8506d8`).
    fn name(
        &self,
        key: u32,
    ) -> ::core::result::Result<impl ::core::convert::AsRef<str>, StoreError>;
    /// Touches a key; replies `()`.
    ///
    ///Serves `Touch` (opcode `0xb61020fa`).
    fn touch(&self, arg0: u32);
    /// Resets; the client does not wait.
    ///
    ///Serves `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it).
    fn reset(&self);
}
::ferry_rpc::__rpc_if_std! {
    #[doc =
    "The async server side of service `counter`: one handler per call of [`Counter`], each an `async fn` (write `async fn` in the impl). Serve it with `Counter::async_server(handler, spawn)`: the calls that come inline (fixed arguments and reply, or a `Bytes` argument and a fixed reply) run as tasks of the executor that `spawn` spawns on, holding no server thread while they wait; the others (streamed replies, one-way calls, text arguments) run to their end on a server thread."]
    pub trait CounterAsyncServer : ::core::marker::Send + ::core::marker::Sync + 'static
    { #[doc = " Adds `n`; returns the new total. Compiled where it is called (`hot`)."]
    #[doc = ""] #[doc = "Serves `Add` (opcode `0xe06cac36`)."] fn add(& self, n : u64) ->
    impl ::core::future::Future < Output = u64 > + ::core::marker::Send; #[doc =
    " Stores bytes under a key; how many are stored now."] #[doc = ""] #[doc =
    "Serves `Put` (opcode `0xeb709090`)."] fn put(& self, key : u32, value : & [u8]) ->
    impl ::core::future::Future < Output = ::core::result::Result < u64, StoreError > > +
    ::core::marker::Send; #[doc = " A key's name, as text."] #[doc = ""] #[doc =
    "Serves `Name` (opcode `0x8a8506d8`)."] fn name(& self, key : u32) -> impl
    ::core::future::Future < Output = ::core::result::Result <
    ::ferry_rpc::__private::String, StoreError > > + ::core::marker::Send; #[doc =
    " Touches a key; replies `()`."] #[doc = ""] #[doc =
    "Serves `Touch` (opcode `0xb61020fa`)."] fn touch(& self, arg0 : u32) -> impl
    ::core::future::Future < Output = () > + ::core::marker::Send; #[doc =
    " Resets; the client does not wait."] #[doc = ""] #[doc =
    "Serves `Reset` (opcode `0x00000007`, one-way: the client returns once the call is sent, and a later call of the same client may be served before it)."]
    fn reset(& self) -> impl ::core::future::Future < Output = () > +
    ::core::marker::Send; } impl < __RpcH : CounterAsyncServer > CounterServer for
    ::ferry_rpc::service::BlockOn < __RpcH > { fn add(& self, n : u64) -> u64 { let
    __rpc_h = ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async move {
    __rpc_h.add(n). await }) } fn put(& self, key : u32, value : & [u8]) ->
    ::core::result::Result < u64, StoreError > { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); let value :
    ::ferry_rpc::__private::Vec < u8 > = value.into(); self.run(async move { __rpc_h
    .put(key, & value). await }) } fn name(& self, key : u32) -> ::core::result::Result <
    impl ::core::convert::AsRef < str >, StoreError > { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async move { __rpc_h
    .name(key). await }) } fn touch(& self, arg0 : u32) { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async move { __rpc_h
    .touch(arg0). await }) } fn reset(& self) { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(self.handler()); self.run(async move { __rpc_h
    .reset(). await }) } } impl < __RpcH : CounterAsyncServer >
    ::ferry_rpc::service::DispatchLater < __RpcH > for Counter { fn
    dispatch_later(handler : & ::ferry_rpc::service::BlockOn < __RpcH >, opcode : u32,
    request : & [u8], body : & [u8], later : ::ferry_rpc::__private::Box < dyn
    ::ferry_rpc::service::Later >,) -> ::core::result::Result < (),
    ::ferry_rpc::__private::Box < dyn ::ferry_rpc::service::Later >> { let _ = (handler,
    request, body); match opcode { 0xe06cac36u32 => ::ferry_rpc::__private::later_fixed::
    < { Counter::__RPC_Q_0 }, { Counter::__RPC_R_0 }, _ > (::core::option::Option::None,
    request, body, later, Counter::__rpc_args_0, | (__rpc_arg0,), _, later | { let
    __rpc_h = ::ferry_rpc::__private::Arc::clone(handler.handler()); handler.spawner()
    .spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_0 } > (later, async move {
    #[allow(clippy::let_unit_value)] let __rpc_reply = __rpc_h.add(__rpc_arg0). await;
    let mut __rpc_buf = [0u8; Counter::__RPC_R_0]; ::ferry_rpc::__private::put(& mut
    __rpc_buf, 0, & __rpc_reply); __rpc_buf })); },), 0xeb709090u32 =>
    ::ferry_rpc::__private::later_fixed:: < { Counter::__RPC_Q_1 }, { Counter::__RPC_R_1
    }, _ > (::core::option::Option::Some(65536u64), request, body, later,
    Counter::__rpc_args_1, | (__rpc_arg0,), __rpc_body, later | { let __rpc_body :
    ::ferry_rpc::__private::Vec < u8 > = __rpc_body.into(); let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(handler.handler()); handler.spawner()
    .spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_1 } > (later, async move {
    #[allow(clippy::let_unit_value)] let __rpc_reply = __rpc_h.put(__rpc_arg0, &
    __rpc_body). await; let mut __rpc_buf = [0u8; Counter::__RPC_R_1];
    ::ferry_rpc::__private::put_result(& mut __rpc_buf, & __rpc_reply); __rpc_buf }));
    },), 0xb61020fau32 => ::ferry_rpc::__private::later_fixed:: < { Counter::__RPC_Q_3 },
    { Counter::__RPC_R_3 }, _ > (::core::option::Option::None, request, body, later,
    Counter::__rpc_args_3, | (__rpc_arg0,), _, later | { let __rpc_h =
    ::ferry_rpc::__private::Arc::clone(handler.handler()); handler.spawner()
    .spawn(::ferry_rpc::__private::task:: < { Counter::__RPC_R_3 } > (later, async move {
    #[allow(clippy::let_unit_value)] let __rpc_reply = __rpc_h.touch(__rpc_arg0). await;
    let mut __rpc_buf = [0u8; Counter::__RPC_R_3]; ::ferry_rpc::__private::put(& mut
    __rpc_buf, 0, & __rpc_reply); __rpc_buf })); },), _ =>
    ::core::result::Result::Err(later), } } }
}

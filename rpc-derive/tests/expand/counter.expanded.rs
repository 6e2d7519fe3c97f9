const _: () = {
    #[allow(dead_code)]
    fn __rpc_assert_wire<T>()
    where
        T: ?Sized + ::rpc_core::__private::zerocopy::IntoBytes
            + ::rpc_core::__private::zerocopy::FromBytes
            + ::rpc_core::__private::zerocopy::Immutable
            + ::rpc_core::__private::zerocopy::KnownLayout,
    {}
    #[allow(dead_code)]
    fn __rpc_assert_all() {
        __rpc_assert_wire::<Add>();
        __rpc_assert_wire::<u64>();
        __rpc_assert_wire::<u64>();
        __rpc_assert_wire::<u32>();
        __rpc_assert_wire::<u64>();
    }
    ::core::assert!(
        ::core::mem::size_of:: < Add > () <= ::rpc_core::layout::SLOT_BYTES,
        "the request type of call `Add` is larger than a 64-byte slot: make it smaller, or stream it (`request = [u8]`)"
    );
    ::core::assert!(
        ::core::mem::size_of:: < u64 > () <= ::rpc_core::layout::SLOT_BYTES,
        "the response type of call `Add` is larger than a 64-byte slot: make it smaller, or stream it (`response = [u8]`)"
    );
    ::core::assert!(
        ::core::mem::size_of:: < u64 > () <= ::rpc_core::layout::SLOT_BYTES,
        "the response type of call `Sum` is larger than a 64-byte slot: make it smaller, or stream it (`response = [u8]`)"
    );
    ::core::assert!(
        ::core::mem::size_of:: < u32 > () <= ::rpc_core::layout::SLOT_BYTES,
        "the request type of call `Name` is larger than a 64-byte slot: make it smaller, or stream it (`request = [u8]`)"
    );
    ::core::assert!(
        ::core::mem::size_of:: < u64 > () <= ::rpc_core::layout::SLOT_BYTES,
        "the request type of call `Bump` is larger than a 64-byte slot: make it smaller, or stream it (`request = [u8]`)"
    );
    let _ = ::core::mem::ManuallyDrop::new(Counter::Add);
    let _ = ::core::mem::ManuallyDrop::new(Counter::Sum);
    let _ = ::core::mem::ManuallyDrop::new(Counter::Name);
    let _ = ::core::mem::ManuallyDrop::new(Counter::Bump);
    let _ = ::core::mem::ManuallyDrop::new(Counter::Ping);
};
impl Counter {
    /// This call's opcode.
    pub const fn opcode(&self) -> u32 {
        match self {
            Self::Add => 0xe06cac36u32,
            Self::Sum => 0xa2af2b86u32,
            Self::Name => 0x8a8506d8u32,
            Self::Bump => 0x00000007u32,
            Self::Ping => 0xde105b87u32,
        }
    }
    /// The call with this opcode, if the service has one.
    pub const fn from_opcode(opcode: u32) -> ::core::option::Option<Self> {
        match opcode {
            0xe06cac36u32 => ::core::option::Option::Some(Self::Add),
            0xa2af2b86u32 => ::core::option::Option::Some(Self::Sum),
            0x8a8506d8u32 => ::core::option::Option::Some(Self::Name),
            0x00000007u32 => ::core::option::Option::Some(Self::Bump),
            0xde105b87u32 => ::core::option::Option::Some(Self::Ping),
            _ => ::core::option::Option::None,
        }
    }
    /// The schema fingerprint (`rpc_core::service::Service::FINGERPRINT`).
    pub const FINGERPRINT: u64 = <Self as ::rpc_core::service::Service>::FINGERPRINT;
}
impl ::rpc_core::service::Service for Counter {
    const NAME: &'static str = "counter";
    const FINGERPRINT: u64 = ::rpc_core::service::Fingerprint::new("counter")
        .call(
            "Add",
            0xe06cac36u32,
            ::rpc_core::service::Shape::of::<Add>(),
            ::rpc_core::service::Shape::of::<u64>(),
        )
        .call(
            "Sum",
            0xa2af2b86u32,
            ::rpc_core::service::Shape::Bytes,
            ::rpc_core::service::Shape::of::<u64>(),
        )
        .call(
            "Name",
            0x8a8506d8u32,
            ::rpc_core::service::Shape::of::<u32>(),
            ::rpc_core::service::Shape::Text,
        )
        .call(
            "Bump",
            0x00000007u32,
            ::rpc_core::service::Shape::of::<u64>(),
            ::rpc_core::service::Shape::None,
        )
        .call(
            "Ping",
            0xde105b87u32,
            ::rpc_core::service::Shape::of::<()>(),
            ::rpc_core::service::Shape::of::<()>(),
        )
        .finish();
    const OPCODES: &'static [u32] = &[
        0xe06cac36u32, 0xa2af2b86u32, 0x8a8506d8u32, 0x00000007u32, 0xde105b87u32,
    ];
}
/**The client side of service `counter`: one method per call of [`Counter`], for every client `rpc_core::Process` (and every other `rpc_core::service::CallSite`).

Every active lane calls a method together with the others (on a GPU: convergently), each with its own request, and gets its own response. A method opens a port with the call's opcode, sends, and (unless the call is one-way) waits for the reply under the process's wait policy; a server that does not know the call answers with an error instead of leaving the caller waiting.*/
pub trait CounterClient {
    /// Adds to a counter; returns the new value.
    ///
    ///Calls `Add` (opcode `0xe06cac36`).
    fn add(
        &self,
        request: Add,
    ) -> ::core::result::Result<u64, ::rpc_core::service::CallError>;
    ///Calls `Sum` (opcode `0xa2af2b86`).
    fn sum(
        &self,
        request: &[u8],
    ) -> ::core::result::Result<u64, ::rpc_core::service::CallError>;
    ///Calls `Name` (opcode `0x8a8506d8`).
    fn name<'__rpc_b>(
        &self,
        request: u32,
        response: &'__rpc_b mut [u8],
    ) -> ::core::result::Result<&'__rpc_b str, ::rpc_core::service::CallError>;
    ///Calls `Bump` (opcode `0x00000007`, one-way).
    fn bump(
        &self,
        request: u64,
    ) -> ::core::result::Result<(), ::rpc_core::service::CallError>;
    ///Calls `Ping` (opcode `0xde105b87`).
    fn ping(&self) -> ::core::result::Result<(), ::rpc_core::service::CallError>;
}
impl<__RpcC> CounterClient for __RpcC
where
    __RpcC: ::rpc_core::service::CallSite + ?::core::marker::Sized,
{
    fn add(
        &self,
        request: Add,
    ) -> ::core::result::Result<u64, ::rpc_core::service::CallError> {
        if let ::core::option::Option::Some(__result) = ::rpc_core::__private::inline_call::<
            Add,
            u64,
        >(::rpc_core::service::CallSite::inline(self), 0xe06cac36u32, &request) {
            return __result;
        }
        let mut port = ::rpc_core::__private::open(
            ::rpc_core::service::CallSite::process(self),
            0xe06cac36u32,
        )?;
        ::rpc_core::__private::send_value(&mut port, &request)?;
        ::rpc_core::__private::recv_value::<u64, _, _, _>(&mut port)
    }
    fn sum(
        &self,
        request: &[u8],
    ) -> ::core::result::Result<u64, ::rpc_core::service::CallError> {
        let mut port = ::rpc_core::__private::open(
            ::rpc_core::service::CallSite::process(self),
            0xa2af2b86u32,
        )?;
        ::rpc_core::__private::send_stream(&mut port, request, false)?;
        ::rpc_core::__private::recv_value::<u64, _, _, _>(&mut port)
    }
    fn name<'__rpc_b>(
        &self,
        request: u32,
        response: &'__rpc_b mut [u8],
    ) -> ::core::result::Result<&'__rpc_b str, ::rpc_core::service::CallError> {
        let mut port = ::rpc_core::__private::open(
            ::rpc_core::service::CallSite::process(self),
            0x8a8506d8u32,
        )?;
        ::rpc_core::__private::send_value(&mut port, &request)?;
        ::rpc_core::__private::recv_text(&mut port, response)
    }
    fn bump(
        &self,
        request: u64,
    ) -> ::core::result::Result<(), ::rpc_core::service::CallError> {
        let mut port = ::rpc_core::__private::open(
            ::rpc_core::service::CallSite::process(self),
            0x00000007u32,
        )?;
        ::rpc_core::__private::send_value(&mut port, &request)?;
        ::core::result::Result::Ok(())
    }
    fn ping(&self) -> ::core::result::Result<(), ::rpc_core::service::CallError> {
        if let ::core::option::Option::Some(__result) = ::rpc_core::__private::inline_call::<
            (),
            (),
        >(::rpc_core::service::CallSite::inline(self), 0xde105b87u32, &()) {
            return __result;
        }
        let mut port = ::rpc_core::__private::open(
            ::rpc_core::service::CallSite::process(self),
            0xde105b87u32,
        )?;
        ::rpc_core::__private::send_value(&mut port, &())?;
        ::rpc_core::__private::recv_value::<(), _, _, _>(&mut port)
    }
}
/**The server side of service `counter`: one handler per call of [`Counter`], and [`dispatch`](CounterServer::dispatch) to serve one call.

A handler runs once for each active lane of the call, in lane order, on the server thread that opened the port (a host server handles every lane of a GPU warp's call). Handlers take `&self`, so several server threads may share one service.*/
pub trait CounterServer {
    /// Adds to a counter; returns the new value.
    ///
    ///Serves `Add` (opcode `0xe06cac36`).
    fn add(&self, request: Add) -> u64;
    ///Serves `Sum` (opcode `0xa2af2b86`).
    fn sum(&self, request: &[u8]) -> u64;
    ///Serves `Name` (opcode `0x8a8506d8`).
    fn name(&self, request: u32) -> impl ::core::convert::AsRef<str>;
    ///Serves `Bump` (opcode `0x00000007`, one-way).
    fn bump(&self, request: u64);
    ///Serves `Ping` (opcode `0xde105b87`).
    fn ping(&self);
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
            0xe06cac36u32 => {
                port.set_status(::rpc_core::service::status::OK);
                port.recv_and_send(|slot, _| {
                    #[allow(clippy::let_unit_value)]
                    let __reply = <Self as CounterServer>::add(
                        self,
                        ::rpc_core::__private::read_slot::<Add>(slot),
                    );
                    ::rpc_core::__private::write_slot(slot, &__reply);
                })?;
                ::core::result::Result::Ok(::rpc_core::service::Served {
                    opcode: 0xe06cac36u32,
                    status: ::rpc_core::service::status::OK,
                })
            }
            0xa2af2b86u32 => {
                let __lanes = ::rpc_core::__private::handled_lanes(port);
                if !::rpc_core::__private::recv_stream_request(
                    port,
                    4096u64,
                    buffers,
                    false,
                )? {
                    return ::core::result::Result::Ok(::rpc_core::service::Served {
                        opcode: 0xa2af2b86u32,
                        status: ::rpc_core::service::status::REJECTED,
                    });
                }
                let mut __replies: [::core::option::Option<_>; 64] = ::core::array::from_fn(|
                    _|
                ::core::option::Option::None);
                let mut __mask = __lanes;
                while __mask != 0 {
                    let __lane = __mask.trailing_zeros() as usize;
                    __mask &= __mask - 1;
                    __replies[__lane] = ::core::option::Option::Some(
                        <Self as CounterServer>::sum(
                            self,
                            ::rpc_core::service::LaneBuffers::lane(
                                &*buffers,
                                __lane as u32,
                            ),
                        ),
                    );
                }
                port.set_status(::rpc_core::service::status::OK);
                port.send(|slot, lane| match &__replies[lane as usize] {
                    ::core::option::Option::Some(reply) => {
                        ::rpc_core::__private::write_slot(slot, reply)
                    }
                    ::core::option::Option::None => slot.words = [0; 8],
                })?;
                ::core::result::Result::Ok(::rpc_core::service::Served {
                    opcode: 0xa2af2b86u32,
                    status: ::rpc_core::service::status::OK,
                })
            }
            0x8a8506d8u32 => {
                let __lanes = ::rpc_core::__private::handled_lanes(port);
                let mut __requests: [::core::option::Option<u32>; 64] = ::core::array::from_fn(|
                    _|
                ::core::option::Option::None);
                port.recv(|slot, lane| {
                    __requests[lane as usize] = ::core::option::Option::Some(
                        ::rpc_core::__private::read_slot::<u32>(slot),
                    );
                })?;
                let mut __replies: [::core::option::Option<_>; 64] = ::core::array::from_fn(|
                    _|
                ::core::option::Option::None);
                let mut __mask = __lanes;
                while __mask != 0 {
                    let __lane = __mask.trailing_zeros() as usize;
                    __mask &= __mask - 1;
                    if let ::core::option::Option::Some(__request) = __requests[__lane]
                        .take()
                    {
                        __replies[__lane] = ::core::option::Option::Some(
                            <Self as CounterServer>::name(self, __request),
                        );
                    }
                }
                port.set_status(::rpc_core::service::status::OK);
                let sent = port
                    .send_n(|lane| match &__replies[lane as usize] {
                        ::core::option::Option::Some(reply) => {
                            ::core::convert::AsRef::<str>::as_ref(reply).as_bytes()
                        }
                        ::core::option::Option::None => &[],
                    });
                match sent {
                    ::core::result::Result::Ok(()) => {}
                    ::core::result::Result::Err(::rpc_core::Error::Rejected) => {
                        return ::core::result::Result::Ok(::rpc_core::service::Served {
                            opcode: 0x8a8506d8u32,
                            status: ::rpc_core::service::status::REJECTED,
                        });
                    }
                    ::core::result::Result::Err(e) => {
                        return ::core::result::Result::Err(e);
                    }
                }
                ::core::result::Result::Ok(::rpc_core::service::Served {
                    opcode: 0x8a8506d8u32,
                    status: ::rpc_core::service::status::OK,
                })
            }
            0x00000007u32 => {
                let __lanes = ::rpc_core::__private::handled_lanes(port);
                let mut __requests: [::core::option::Option<u64>; 64] = ::core::array::from_fn(|
                    _|
                ::core::option::Option::None);
                port.recv(|slot, lane| {
                    __requests[lane as usize] = ::core::option::Option::Some(
                        ::rpc_core::__private::read_slot::<u64>(slot),
                    );
                })?;
                let mut __mask = __lanes;
                while __mask != 0 {
                    let __lane = __mask.trailing_zeros() as usize;
                    __mask &= __mask - 1;
                    if let ::core::option::Option::Some(__request) = __requests[__lane]
                        .take()
                    {
                        <Self as CounterServer>::bump(self, __request);
                    }
                }
                ::core::result::Result::Ok(::rpc_core::service::Served {
                    opcode: 0x00000007u32,
                    status: ::rpc_core::service::status::OK,
                })
            }
            0xde105b87u32 => {
                port.set_status(::rpc_core::service::status::OK);
                port.recv_and_send(|slot, _| {
                    #[allow(clippy::let_unit_value)]
                    let __reply = <Self as CounterServer>::ping(self);
                    slot.words = [0; 8];
                })?;
                ::core::result::Result::Ok(::rpc_core::service::Served {
                    opcode: 0xde105b87u32,
                    status: ::rpc_core::service::status::OK,
                })
            }
            ::rpc_core::service::HANDSHAKE => {
                ::rpc_core::__private::serve_handshake(
                    port,
                    <Counter as ::rpc_core::service::Service>::FINGERPRINT,
                )
            }
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
            0xe06cac36u32 => {
                if !::rpc_core::__private::inline_fits::<Add, u64>() {
                    return ::core::option::Option::None;
                }
                let ::core::option::Option::Some(__request) = ::rpc_core::__private::inline_request::<
                    Add,
                >(request) else {
                    return ::core::option::Option::Some((
                        ::rpc_core::service::status::BAD_REQUEST,
                        0,
                    ));
                };
                #[allow(clippy::let_unit_value)]
                let __reply = <Self as CounterServer>::add(self, __request);
                ::core::option::Option::Some((
                    ::rpc_core::service::status::OK,
                    ::rpc_core::__private::inline_reply(reply, &__reply),
                ))
            }
            0xa2af2b86u32 => ::core::option::Option::None,
            0x8a8506d8u32 => ::core::option::Option::None,
            0x00000007u32 => ::core::option::Option::None,
            0xde105b87u32 => {
                if !::rpc_core::__private::inline_fits::<(), ()>() {
                    return ::core::option::Option::None;
                }
                if ::rpc_core::__private::inline_request::<()>(request).is_none() {
                    return ::core::option::Option::Some((
                        ::rpc_core::service::status::BAD_REQUEST,
                        0,
                    ));
                }
                #[allow(clippy::let_unit_value)]
                let __reply = <Self as CounterServer>::ping(self);
                ::core::option::Option::Some((
                    ::rpc_core::service::status::OK,
                    ::rpc_core::__private::inline_reply(reply, &__reply),
                ))
            }
            ::rpc_core::service::HANDSHAKE => ::core::option::Option::None,
            _ => {
                ::core::option::Option::Some((
                    ::rpc_core::service::status::UNKNOWN_OPCODE,
                    0,
                ))
            }
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
                <Self as CounterServer>::dispatch(self, &mut port, buffers)
                    .map(::core::option::Option::Some)
            }
            ::core::option::Option::None => {
                ::core::result::Result::Ok(::core::option::Option::None)
            }
        }
    }
}

//! Services written as a user writes them from the README (`ferry_shm` the one dependency: the
//! derive, `wire`, `Bytes`, `Text` through it), at the edges of what the derive takes: every kind
//! of variant, field types at the edges (u8 to i128, bool, char, floats, arrays, nested `#[wire]`
//! structs and data-carrying enums, zero-sized fields), arguments and replies at the inline
//! lines' boundaries, names that look like the generated code's own, many calls, several
//! services on one server, async handlers. Each call must return exactly what its handler
//! returned, on every path a call takes (inline, the packets, the lines without a bulk area, a
//! small bulk area, async handlers), or fail with an error that says why.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_shm::ferry_rpc::service::{Error, Service, Status};
use ferry_shm::{
    wire, Bytes, ClientConfig, RpcOpcodes, ServerConfig, ShmClient, ShmError, ShmServer, Text,
};
use ferry_testkit::Watchdog;

const DEADLINE: Duration = Duration::from_secs(20);

fn unique(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-test-user-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A small server: 32 ports, one worker, `bulk` bytes of bulk area a port, inline or not.
fn config(inline: bool, bulk: usize) -> ServerConfig {
    ServerConfig {
        ports: 32,
        workers: 1,
        inline,
        bulk,
        ..ServerConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Types of one's own.

/// Four bytes, no padding.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inner {
    a: u16,
    b: u8,
    c: bool,
}

/// A struct holding structs and an array of them: 24 bytes, no padding.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outer {
    big: u64,
    inner: [Inner; 2],
    tail: i32,
    more: Inner,
}

/// A data-carrying enum (every variant 8 bytes: no padding).
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Dot(u32) = 1,
    Circle { r: u32 } = 2,
    Rect { w: u16, h: u16 } = 7,
}

/// Every primitive of [`Kinds::Prims`], reordered without padding: 48 bytes.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mixed {
    b: i128,
    f: f64,
    e: f32,
    d: char,
    g: [u16; 3],
    a: u8,
    c: bool,
    h: i8,
    pad: [u8; 7],
}

/// An error whose first value is 0 (the tag byte, not the value, tells an error).
#[wire]
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oops {
    Zero = 0,
    Other = 255,
}

/// A zero-sized error.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nope;

/// An error of 63 bytes: with its tag, a whole slot.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigError {
    bytes: [u8; 63],
}

// ---------------------------------------------------------------------------------------------
// The service of every kind of call.

#[derive(RpcOpcodes)]
#[rpc(service = "test.user.kinds")]
pub enum Kinds {
    /// A unit variant, no response: replies `()`, and the client waits for it.
    Nothing,
    /// `response = ()` written out.
    #[rpc(response = ())]
    UnitReply,
    /// A tuple variant of one field.
    #[rpc(response = u8)]
    Byte(u8),
    /// Every primitive, packed unaligned: 41 bytes of arguments (one past the head line).
    #[rpc(response = Mixed)]
    Prims {
        a: u8,
        b: i128,
        c: bool,
        d: char,
        e: f32,
        f: f64,
        g: [u16; 3],
        h: i8,
    },
    /// Floats echoed: their bits must come back as they went (NaN payloads, -0.0).
    #[rpc(response = f64)]
    Float64 { x: f64 },
    #[rpc(response = f32)]
    Float32 { x: f32 },
    /// A nested struct, changed by the handler.
    #[rpc(response = Outer)]
    Nested { o: Outer },
    /// A data-carrying enum, changed by the handler.
    #[rpc(response = Shape)]
    Turn { s: Shape },
    /// Four 128-bit values: the 64 bytes of a whole slot.
    #[rpc(response = [u128; 4])]
    Huge(u128, i128, u128, i128),
    /// Zero-sized fields around a byte.
    #[rpc(response = u8)]
    Zst {
        a: (),
        b: [u8; 0],
        c: u8,
        d: PhantomData<u64>,
    },
    #[rpc(response = bool)]
    Flag(bool),
    #[rpc(response = char)]
    Letter(char),
    #[rpc(response = (usize))]
    Sizes(usize, isize),
    /// Thirteen fixed arguments: one more than the runtime's decoder of tuples takes.
    #[rpc(response = [u8; 13])]
    Thirteen(u8, u8, u8, u8, u8, u8, u8, u8, u8, u8, u8, u8, u16),
    /// An error whose value is 0, and a reply beside it.
    #[rpc(response = u64, error = Oops)]
    Fail { code: u8 },
    /// A zero-sized error with no reply value.
    #[rpc(error = Nope)]
    Maybe { ok: bool },
    /// An error of 63 bytes beside a one-byte reply: 64 bytes tagged.
    #[rpc(response = u8, error = BigError)]
    Big { fail: bool },
    /// A text reply with an error.
    #[rpc(response = Text, error = Oops, limit = 1000)]
    Say { n: u32, fail: bool },
    /// Bytes in and out.
    #[rpc(response = Bytes, limit = 1 << 16)]
    Mirror { data: Bytes },
    /// Text in, text out (reversed by chars).
    #[rpc(response = Text, limit = 1 << 16)]
    Backwards { text: Text },
    /// A stream limit of zero: only an empty stream passes.
    #[rpc(response = u64, limit = 0)]
    Empty { data: Bytes },
    /// A one-way call with a fixed argument.
    #[rpc(oneway)]
    Note { x: u64 },
    /// A one-way call with bytes.
    #[rpc(oneway, limit = 4096)]
    NoteBytes { data: Bytes },
    /// What the one-way calls left.
    #[rpc(response = u64)]
    Noted,
}

/// A handler of [`Kinds`]: `noted` sums what the one-way calls sent.
#[derive(Default)]
struct KindsImpl {
    noted: AtomicU64,
}

#[allow(clippy::too_many_arguments)]
fn mixed(a: u8, b: i128, c: bool, d: char, e: f32, f: f64, g: [u16; 3], h: i8) -> Mixed {
    Mixed {
        b,
        f,
        e,
        d,
        g,
        a,
        c,
        h,
        pad: [0; 7],
    }
}

fn nested(o: Outer) -> Outer {
    Outer {
        big: o.big.wrapping_mul(3),
        inner: [o.inner[1], o.inner[0]],
        tail: o.tail.wrapping_neg(),
        more: Inner {
            a: o.more.a ^ 0xffff,
            b: o.more.b.wrapping_add(1),
            c: !o.more.c,
        },
    }
}

fn turn(s: Shape) -> Shape {
    match s {
        Shape::Dot(x) => Shape::Circle { r: x },
        Shape::Circle { r } => Shape::Rect {
            w: r as u16,
            h: (r >> 16) as u16,
        },
        Shape::Rect { w, h } => Shape::Dot((h as u32) << 16 | w as u32),
    }
}

fn huge(a: u128, b: i128, c: u128, d: i128) -> [u128; 4] {
    [d as u128, c, b as u128, a]
}

fn thirteen(x: [u8; 12], y: u16) -> [u8; 13] {
    let mut out = [0u8; 13];
    for (i, b) in x.iter().enumerate() {
        out[11 - i] = *b;
    }
    out[12] = (y >> 8) as u8 ^ y as u8;
    out
}

fn say(n: u32, fail: bool) -> Result<String, Oops> {
    if fail {
        return Err(if n == 0 { Oops::Zero } else { Oops::Other });
    }
    // Multi-byte characters, so that a stream's handoffs split some of them.
    Ok("é🦀x".repeat(n as usize))
}

impl KindsServer for KindsImpl {
    fn nothing(&self) {}
    fn unit_reply(&self) {}
    fn byte(&self, arg0: u8) -> u8 {
        arg0.wrapping_add(1)
    }
    #[allow(clippy::too_many_arguments)]
    fn prims(&self, a: u8, b: i128, c: bool, d: char, e: f32, f: f64, g: [u16; 3], h: i8) -> Mixed {
        mixed(a, b, c, d, e, f, g, h)
    }
    fn float64(&self, x: f64) -> f64 {
        x
    }
    fn float32(&self, x: f32) -> f32 {
        x
    }
    fn nested(&self, o: Outer) -> Outer {
        nested(o)
    }
    fn turn(&self, s: Shape) -> Shape {
        turn(s)
    }
    fn huge(&self, arg0: u128, arg1: i128, arg2: u128, arg3: i128) -> [u128; 4] {
        huge(arg0, arg1, arg2, arg3)
    }
    fn zst(&self, _a: (), _b: [u8; 0], c: u8, _d: PhantomData<u64>) -> u8 {
        c ^ 0x5a
    }
    fn flag(&self, arg0: bool) -> bool {
        !arg0
    }
    fn letter(&self, arg0: char) -> char {
        arg0
    }
    fn sizes(&self, arg0: usize, arg1: isize) -> usize {
        arg0 ^ arg1 as usize
    }
    #[allow(clippy::too_many_arguments)]
    fn thirteen(
        &self,
        arg0: u8,
        arg1: u8,
        arg2: u8,
        arg3: u8,
        arg4: u8,
        arg5: u8,
        arg6: u8,
        arg7: u8,
        arg8: u8,
        arg9: u8,
        arg10: u8,
        arg11: u8,
        arg12: u16,
    ) -> [u8; 13] {
        thirteen(
            [
                arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7, arg8, arg9, arg10, arg11,
            ],
            arg12,
        )
    }
    fn fail(&self, code: u8) -> Result<u64, Oops> {
        match code {
            0 => Err(Oops::Zero),
            255 => Err(Oops::Other),
            n => Ok(n as u64 * 1000),
        }
    }
    fn maybe(&self, ok: bool) -> Result<(), Nope> {
        if ok {
            Ok(())
        } else {
            Err(Nope)
        }
    }
    fn big(&self, fail: bool) -> Result<u8, BigError> {
        if fail {
            Err(BigError {
                bytes: std::array::from_fn(|i| i as u8 ^ 0xa5),
            })
        } else {
            Ok(77)
        }
    }
    fn say(&self, n: u32, fail: bool) -> Result<impl AsRef<str>, Oops> {
        say(n, fail)
    }
    fn mirror(&self, data: &[u8]) -> impl AsRef<[u8]> {
        data
    }
    fn backwards(&self, text: &str) -> impl AsRef<str> {
        text.chars().rev().collect::<String>()
    }
    fn empty(&self, data: &[u8]) -> u64 {
        data.len() as u64 + 1
    }
    fn note(&self, x: u64) {
        self.noted.fetch_add(x, Ordering::SeqCst);
    }
    fn note_bytes(&self, data: &[u8]) {
        let sum: u64 = data.iter().map(|&b| b as u64).sum();
        self.noted.fetch_add(sum, Ordering::SeqCst);
    }
    fn noted(&self) -> u64 {
        self.noted.load(Ordering::SeqCst)
    }
}

/// The same handler, async: each method awaits the blocking one's answer.
struct KindsAsync(KindsImpl);

impl KindsAsyncServer for KindsAsync {
    async fn nothing(&self) {}
    async fn unit_reply(&self) {}
    async fn byte(&self, arg0: u8) -> u8 {
        tokio::task::yield_now().await;
        self.0.byte(arg0)
    }
    #[allow(clippy::too_many_arguments)]
    async fn prims(
        &self,
        a: u8,
        b: i128,
        c: bool,
        d: char,
        e: f32,
        f: f64,
        g: [u16; 3],
        h: i8,
    ) -> Mixed {
        tokio::task::yield_now().await;
        self.0.prims(a, b, c, d, e, f, g, h)
    }
    async fn float64(&self, x: f64) -> f64 {
        x
    }
    async fn float32(&self, x: f32) -> f32 {
        x
    }
    async fn nested(&self, o: Outer) -> Outer {
        nested(o)
    }
    async fn turn(&self, s: Shape) -> Shape {
        turn(s)
    }
    async fn huge(&self, arg0: u128, arg1: i128, arg2: u128, arg3: i128) -> [u128; 4] {
        huge(arg0, arg1, arg2, arg3)
    }
    async fn zst(&self, a: (), b: [u8; 0], c: u8, d: PhantomData<u64>) -> u8 {
        self.0.zst(a, b, c, d)
    }
    async fn flag(&self, arg0: bool) -> bool {
        !arg0
    }
    async fn letter(&self, arg0: char) -> char {
        arg0
    }
    async fn sizes(&self, arg0: usize, arg1: isize) -> usize {
        self.0.sizes(arg0, arg1)
    }
    #[allow(clippy::too_many_arguments)]
    async fn thirteen(
        &self,
        arg0: u8,
        arg1: u8,
        arg2: u8,
        arg3: u8,
        arg4: u8,
        arg5: u8,
        arg6: u8,
        arg7: u8,
        arg8: u8,
        arg9: u8,
        arg10: u8,
        arg11: u8,
        arg12: u16,
    ) -> [u8; 13] {
        thirteen(
            [
                arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7, arg8, arg9, arg10, arg11,
            ],
            arg12,
        )
    }
    async fn fail(&self, code: u8) -> Result<u64, Oops> {
        tokio::task::yield_now().await;
        self.0.fail(code)
    }
    async fn maybe(&self, ok: bool) -> Result<(), Nope> {
        self.0.maybe(ok)
    }
    async fn big(&self, fail: bool) -> Result<u8, BigError> {
        self.0.big(fail)
    }
    async fn say(&self, n: u32, fail: bool) -> Result<String, Oops> {
        say(n, fail)
    }
    async fn mirror(&self, data: &[u8]) -> Vec<u8> {
        data.to_vec()
    }
    async fn backwards(&self, text: &str) -> String {
        text.chars().rev().collect()
    }
    async fn empty(&self, data: &[u8]) -> u64 {
        data.len() as u64 + 1
    }
    async fn note(&self, x: u64) {
        self.0.note(x)
    }
    async fn note_bytes(&self, data: &[u8]) {
        self.0.note_bytes(data)
    }
    async fn noted(&self) -> u64 {
        self.0.noted()
    }
}

/// Every call of [`Kinds`], each reply checked against what the handler returns.
fn check_kinds(c: &KindsClient<&ShmClient>) {
    assert_eq!(c.nothing(), Ok(()));
    assert_eq!(c.unit_reply(), Ok(()));
    for x in [0u8, 1, 127, 254, 255] {
        assert_eq!(c.byte(x), Ok(x.wrapping_add(1)));
    }
    let cases = [
        (0u8, 0i128, false, '\0', 0.0f32, 0.0f64, [0u16; 3], 0i8),
        (
            255,
            i128::MIN,
            true,
            char::MAX,
            f32::MIN_POSITIVE,
            f64::MAX,
            [u16::MAX, 1, 0x8000],
            i8::MIN,
        ),
        (
            0x5a,
            i128::MAX,
            true,
            '🦀',
            -0.0,
            -f64::EPSILON,
            [1, 2, 3],
            -1,
        ),
    ];
    for (a, b, cc, d, e, f, g, h) in cases {
        let got = c.prims(a, b, cc, d, e, f, g, h);
        let want = mixed(a, b, cc, d, e, f, g, h);
        let got = got.unwrap_or_else(|e| panic!("prims: {e:?}"));
        // Compared by bits: -0.0 == 0.0 as floats.
        assert_eq!(got.e.to_bits(), want.e.to_bits());
        assert_eq!(got.f.to_bits(), want.f.to_bits());
        assert_eq!(got, want);
    }
    for bits in [
        0u64,
        1 << 63,
        0x7ff8_0000_0000_0001,
        0xfff0_0000_0000_0001,
        f64::INFINITY.to_bits(),
        u64::MAX,
    ] {
        let got = c.float64(f64::from_bits(bits)).unwrap();
        assert_eq!(got.to_bits(), bits, "f64 {bits:#x}");
    }
    for bits in [0u32, 1 << 31, 0x7fc0_0001, 0xff80_0001, u32::MAX] {
        let got = c.float32(f32::from_bits(bits)).unwrap();
        assert_eq!(got.to_bits(), bits, "f32 {bits:#x}");
    }
    let o = Outer {
        big: 0x0123_4567_89ab_cdef,
        inner: [
            Inner {
                a: 1,
                b: 2,
                c: true,
            },
            Inner {
                a: 0xffff,
                b: 0,
                c: false,
            },
        ],
        tail: i32::MIN,
        more: Inner {
            a: 7,
            b: 255,
            c: true,
        },
    };
    assert_eq!(c.nested(o), Ok(nested(o)));
    for s in [
        Shape::Dot(0xdead_beef),
        Shape::Circle { r: 0x1234_5678 },
        Shape::Rect { w: 3, h: 0xffff },
    ] {
        assert_eq!(c.turn(s), Ok(turn(s)));
    }
    let (a, b, cc, d) = (
        u128::MAX - 5,
        i128::MIN + 9,
        0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
        -1,
    );
    assert_eq!(c.huge(a, b, cc, d), Ok(huge(a, b, cc, d)));
    assert_eq!(c.zst((), [], 0xa5, PhantomData), Ok(0xa5 ^ 0x5a));
    assert_eq!(c.flag(true), Ok(false));
    assert_eq!(c.flag(false), Ok(true));
    for ch in ['\0', 'a', '\u{d7ff}', '\u{e000}', char::MAX] {
        assert_eq!(c.letter(ch), Ok(ch));
    }
    assert_eq!(c.sizes(usize::MAX, -1), Ok(0));
    assert_eq!(c.sizes(5, 3), Ok(6));
    let x: [u8; 12] = std::array::from_fn(|i| (i * 17 + 3) as u8);
    assert_eq!(
        c.thirteen(
            x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], 0xabcd
        ),
        Ok(thirteen(x, 0xabcd))
    );
    assert_eq!(c.fail(0), Err(Error::App(Oops::Zero)));
    assert_eq!(c.fail(255), Err(Error::App(Oops::Other)));
    assert_eq!(c.fail(7), Ok(7000));
    assert_eq!(c.maybe(true), Ok(()));
    assert_eq!(c.maybe(false), Err(Error::App(Nope)));
    assert_eq!(c.big(false), Ok(77));
    assert_eq!(
        c.big(true),
        Err(Error::App(BigError {
            bytes: std::array::from_fn(|i| i as u8 ^ 0xa5)
        }))
    );
    for n in [0u32, 1, 5, 6, 7, 8, 9, 10, 50, 142] {
        assert_eq!(c.say(n, false), Ok(say(n, false).unwrap()), "say {n}");
    }
    // 143 repetitions: 1001 bytes, one past the limit.
    assert_eq!(
        c.say(143, false),
        Err(Error::Status(Status::ReplyTooLarge {
            len: 1001,
            limit: 1000
        }))
    );
    assert_eq!(c.say(0, true), Err(Error::App(Oops::Zero)));
    assert_eq!(c.say(3, true), Err(Error::App(Oops::Other)));
    let mut buf = [0u8; 7];
    assert_eq!(c.say_into(1, false, &mut buf), Ok("é🦀x"));
    let mut short = [0u8; 6];
    assert!(matches!(
        c.say_into(1, false, &mut short),
        Err(Error::Status(Status::ReplyTooLarge { .. }))
    ));
    for n in [
        0usize, 1, 39, 40, 41, 55, 56, 57, 63, 64, 65, 95, 96, 97, 255, 256, 257, 4096,
    ] {
        let data: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
        assert_eq!(c.mirror(&data), Ok(data.clone()), "mirror {n}");
        let text: String = "aé🦀".chars().cycle().take(n).collect();
        let back: String = text.chars().rev().collect();
        assert_eq!(c.backwards(&text), Ok(back), "backwards {n}");
    }
    assert_eq!(c.empty(&[]), Ok(1));
    assert_eq!(c.empty(&[1]), Err(Error::Status(Status::Rejected)));
    let before = c.noted().unwrap();
    c.note(5).unwrap();
    c.note_bytes(&[1, 2, 3]).unwrap();
    c.note_bytes(&[9; 300]).unwrap();
    let want = before + 5 + 6 + 2700;
    let watch = std::time::Instant::now();
    while c.noted().unwrap() != want {
        assert!(watch.elapsed() < DEADLINE, "one-way calls never served");
        std::thread::yield_now();
    }
}

fn kinds_client(server: &ShmServer, sticky: bool) -> ShmClient {
    let config = ClientConfig::default()
        .service::<Kinds>()
        .deadline(DEADLINE)
        .sticky(sticky);
    ShmClient::attach(server.path(), config).unwrap()
}

// Tries: every kind of call of `Kinds`, field types at the edges of what the derive takes,
// through each path a call can take (inline with a bulk area, through the packets, inline
// without a bulk area, inline with a bulk area of one line), sticky and not. Must hold: every
// reply is exactly what the handler returned, errors come back as the handler's, over-limit
// streams are refused as the docs say.
#[test]
fn every_kind_of_field_and_reply_round_trips_on_every_path() {
    let _watchdog = Watchdog::new("kinds on every path", Duration::from_secs(120));
    for (inline, bulk) in [(true, 4096), (false, 4096), (true, 0), (true, 64)] {
        let server = ShmServer::start(
            unique("kinds"),
            config(inline, bulk),
            Kinds::server(KindsImpl::default()),
        )
        .unwrap();
        for sticky in [false, true] {
            let shm = kinds_client(&server, sticky);
            check_kinds(&Kinds::client(&shm));
        }
        // The calls took the path the server offers.
        let stats = server.stats();
        assert_eq!(stats.inline > 0, inline, "{stats:?}");
        assert_eq!(stats.panicked, 0, "{stats:?}");
        server.shutdown(Duration::from_secs(5));
    }
}

// Tries: the same calls served by async handlers (`Kinds::async_server`), through the blocking
// client and the async client. Must hold: the same replies as the blocking handlers give.
#[test]
fn every_kind_of_call_round_trips_through_async_handlers() {
    let _watchdog = Watchdog::new("kinds async", Duration::from_secs(120));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (inline, bulk) in [(true, 4096), (true, 0), (false, 4096)] {
        let handle = rt.handle().clone();
        let service = Kinds::async_server(KindsAsync(KindsImpl::default()), move |task| {
            handle.spawn(task);
        });
        let server =
            ShmServer::start(unique("kinds-async"), config(inline, bulk), service).unwrap();
        let shm = Arc::new(kinds_client(&server, false));
        check_kinds(&Kinds::client(&*shm));
        let shm2 = Arc::clone(&shm);
        rt.block_on(async move {
            let c = Kinds::async_client(&*shm2);
            assert_eq!(c.nothing().await, Ok(()));
            assert_eq!(c.byte(9).await, Ok(10));
            let o = Outer {
                big: 1,
                inner: [Inner {
                    a: 1,
                    b: 2,
                    c: false,
                }; 2],
                tail: -5,
                more: Inner {
                    a: 0,
                    b: 0,
                    c: true,
                },
            };
            assert_eq!(c.nested(o).await, Ok(nested(o)));
            assert_eq!(c.huge(1, -1, 2, -2).await, Ok(huge(1, -1, 2, -2)));
            assert_eq!(c.fail(0).await, Err(Error::App(Oops::Zero)));
            assert_eq!(c.maybe(false).await, Err(Error::App(Nope)));
            assert_eq!(c.say(3, false).await, Ok(say(3, false).unwrap()));
            assert_eq!(c.mirror(&[1, 2, 3]).await, Ok(vec![1, 2, 3]));
            assert_eq!(c.backwards("ab🦀").await, Ok("🦀ba".to_string()));
            assert_eq!(c.empty(&[]).await, Ok(1));
            assert_eq!(c.empty(&[0]).await, Err(Error::Status(Status::Rejected)));
        });
        drop(shm);
        server.shutdown(Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Sizes at the inline lines' boundaries: a head line carries 40 bytes, each wide line 56 more
// (96, 152, 208), 256 in all; a slot holds 64.

#[derive(RpcOpcodes)]
#[rpc(service = "test.user.sizes")]
pub enum Sizes {
    #[rpc(response = [u8; 1])]
    S1 { a: [u8; 1] },
    #[rpc(response = [u8; 32])]
    S32 { a: [u8; 32] },
    #[rpc(response = [u8; 39])]
    S39 { a: [u8; 39] },
    #[rpc(response = [u8; 40])]
    S40 { a: [u8; 40] },
    #[rpc(response = [u8; 41])]
    S41 { a: [u8; 41] },
    #[rpc(response = [u8; 56])]
    S56 { a: [u8; 56] },
    #[rpc(response = [u8; 57])]
    S57 { a: [u8; 57] },
    #[rpc(response = [u8; 63])]
    S63 { a: [u8; 63] },
    #[rpc(response = [u8; 64])]
    S64 { a: [u8; 64] },
    /// Tagged replies: 40, 41 and 64 bytes with the tag.
    #[rpc(response = [u8; 39], error = u8)]
    T40 { a: [u8; 39], fail: bool },
    #[rpc(response = [u8; 40], error = u8)]
    T41 { a: [u8; 40], fail: bool },
    #[rpc(response = [u8; 63], error = [u8; 2])]
    T64 { a: [u8; 63], fail: bool },
    /// A whole slot of fixed arguments and a stream after them: 64 + n bytes of request.
    #[rpc(response = [u8; 64], limit = 1 << 20)]
    Tail { head: [u8; 64], data: Bytes },
    /// 41 bytes of fixed arguments and a stream, with an error.
    #[rpc(response = [u64; 2], error = u8, limit = 1 << 20)]
    Odd { head: [u8; 41], data: Bytes },
}

/// Each byte plus its index, reversed: never the argument itself.
fn scramble<const N: usize>(a: [u8; N]) -> [u8; N] {
    std::array::from_fn(|i| a[N - 1 - i].wrapping_add(i as u8))
}

fn tail(head: [u8; 64], data: &[u8]) -> [u8; 64] {
    let mut out = scramble(head);
    for (i, b) in data.iter().enumerate() {
        out[i % 64] = out[i % 64].wrapping_mul(31).wrapping_add(*b);
    }
    out[0] ^= data.len() as u8;
    out[1] ^= (data.len() >> 8) as u8;
    out
}

fn odd(head: [u8; 41], data: &[u8]) -> Result<[u64; 2], u8> {
    if data.first() == Some(&0xee) {
        return Err(head[40]);
    }
    let h: u64 = head.iter().map(|&b| b as u64).sum();
    let d: u64 = data
        .iter()
        .enumerate()
        .map(|(i, &b)| (i as u64 + 1) * b as u64)
        .sum();
    Ok([h << 32 | data.len() as u64, d])
}

struct SizesImpl;

impl SizesServer for SizesImpl {
    fn s1(&self, a: [u8; 1]) -> [u8; 1] {
        scramble(a)
    }
    fn s32(&self, a: [u8; 32]) -> [u8; 32] {
        scramble(a)
    }
    fn s39(&self, a: [u8; 39]) -> [u8; 39] {
        scramble(a)
    }
    fn s40(&self, a: [u8; 40]) -> [u8; 40] {
        scramble(a)
    }
    fn s41(&self, a: [u8; 41]) -> [u8; 41] {
        scramble(a)
    }
    fn s56(&self, a: [u8; 56]) -> [u8; 56] {
        scramble(a)
    }
    fn s57(&self, a: [u8; 57]) -> [u8; 57] {
        scramble(a)
    }
    fn s63(&self, a: [u8; 63]) -> [u8; 63] {
        scramble(a)
    }
    fn s64(&self, a: [u8; 64]) -> [u8; 64] {
        scramble(a)
    }
    fn t40(&self, a: [u8; 39], fail: bool) -> Result<[u8; 39], u8> {
        if fail {
            Err(a[0])
        } else {
            Ok(scramble(a))
        }
    }
    fn t41(&self, a: [u8; 40], fail: bool) -> Result<[u8; 40], u8> {
        if fail {
            Err(a[39])
        } else {
            Ok(scramble(a))
        }
    }
    fn t64(&self, a: [u8; 63], fail: bool) -> Result<[u8; 63], [u8; 2]> {
        if fail {
            Err([a[0], a[62]])
        } else {
            Ok(scramble(a))
        }
    }
    fn tail(&self, head: [u8; 64], data: &[u8]) -> [u8; 64] {
        tail(head, data)
    }
    fn odd(&self, head: [u8; 41], data: &[u8]) -> Result<[u64; 2], u8> {
        odd(head, data)
    }
}

fn pattern<const N: usize>(seed: u8) -> [u8; N] {
    std::array::from_fn(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) | 1)
}

fn check_sizes(c: &SizesClient<&ShmClient>, seed: u8) {
    macro_rules! each {
        ($($m:ident $n:literal),*) => {$(
            let a: [u8; $n] = pattern(seed);
            assert_eq!(c.$m(a), Ok(scramble(a)), "{} bytes", $n);
        )*};
    }
    each!(s1 1, s32 32, s39 39, s40 40, s41 41, s56 56, s57 57, s63 63, s64 64);
    let a: [u8; 39] = pattern(seed);
    assert_eq!(c.t40(a, false), Ok(scramble(a)));
    assert_eq!(c.t40(a, true), Err(Error::App(a[0])));
    let a: [u8; 40] = pattern(seed);
    assert_eq!(c.t41(a, false), Ok(scramble(a)));
    assert_eq!(c.t41(a, true), Err(Error::App(a[39])));
    let a: [u8; 63] = pattern(seed);
    assert_eq!(c.t64(a, false), Ok(scramble(a)));
    assert_eq!(c.t64(a, true), Err(Error::App([a[0], a[62]])));
    // Request lengths 64 + n around each line boundary and past the lines' 256 bytes.
    let head: [u8; 64] = pattern(seed);
    for n in [
        0usize, 1, 31, 32, 33, 87, 88, 89, 143, 144, 145, 191, 192, 193, 200, 1000, 70_000,
    ] {
        let data: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
        assert_eq!(c.tail(head, &data), Ok(tail(head, &data)), "tail {n}");
        assert_eq!(
            c.tail_with(head, n, |buf| buf.copy_from_slice(&data)),
            Ok(tail(head, &data)),
            "tail_with {n}"
        );
    }
    let head: [u8; 41] = pattern(seed);
    for n in [
        0usize, 1, 54, 55, 56, 110, 111, 112, 166, 167, 215, 216, 5000,
    ] {
        let mut data: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(3) ^ seed).collect();
        if let Some(first) = data.first_mut() {
            *first &= 0x7f;
        }
        assert_eq!(c.odd(head, &data), Ok(odd(head, &data).unwrap()), "odd {n}");
        if n > 0 {
            data[0] = 0xee;
            assert_eq!(c.odd(head, &data), Err(Error::App(head[40])), "odd err {n}");
        }
    }
}

// Tries: fixed arguments and replies of 1, 32, 39, 40, 41, 56, 57, 63 and 64 bytes, tagged
// replies of 40, 41 and 64 bytes, and a whole slot of fixed arguments followed by a stream whose
// request ends on each side of every line boundary and past the lines' 256 bytes, on every path
// (inline with a bulk area, without one, with a bulk area of one line; the packets), blocking and
// async handlers. Must hold: every reply is what the handler returned.
#[test]
fn arguments_and_replies_at_the_line_boundaries_round_trip() {
    let _watchdog = Watchdog::new("sizes", Duration::from_secs(120));
    for (inline, bulk) in [(true, 4096), (true, 0), (true, 64), (false, 64), (false, 0)] {
        let server = ShmServer::start(
            unique("sizes"),
            config(inline, bulk),
            Sizes::server(SizesImpl),
        )
        .unwrap();
        for sticky in [false, true] {
            let shm = ShmClient::attach(
                server.path(),
                ClientConfig::default()
                    .service::<Sizes>()
                    .deadline(DEADLINE)
                    .sticky(sticky),
            )
            .unwrap();
            check_sizes(&Sizes::client(&shm), sticky as u8 * 100 + bulk as u8);
        }
        server.shutdown(Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Names that look like the generated code's own or the language's.

#[derive(RpcOpcodes)]
#[rpc(service = "test.user.names")]
pub enum Names {
    /// Variants named as the runtime's and std's types.
    #[rpc(response = u32)]
    Call { site: u32 },
    #[rpc(response = u32)]
    Reply { reply: u32 },
    #[rpc(response = u32)]
    Error { error: u32 },
    #[rpc(response = u32)]
    Client { client: u32 },
    #[rpc(response = u32)]
    Server { server: u32 },
    #[rpc(response = u32)]
    Service { service: u32 },
    #[rpc(response = u32)]
    Dispatch {
        handler: u32,
        port: u32,
        buffers: u32,
    },
    #[rpc(response = u32)]
    Opcode { opcode: u32 },
    #[rpc(response = u32)]
    Fingerprint { via: u32 },
    #[rpc(response = u32)]
    Handshake { request: u32, body: u32, later: u32 },
    #[rpc(response = u32)]
    Result { out: u32 },
    #[rpc(response = u32)]
    Ok { d: u32, s: u32 },
    #[rpc(response = u32)]
    Some { c: u32 },
    #[rpc(response = u32)]
    None,
    #[rpc(response = u32)]
    Self_ { self_: u32 },
    /// Variants whose methods are keywords (raw identifiers), fields that are raw identifiers.
    #[rpc(response = u32)]
    Type { r#type: u32, r#match: u32 },
    #[rpc(response = u32)]
    Match { r#fn: u32 },
    #[rpc(response = u32)]
    Async { r#async: u32 },
    #[rpc(response = u32)]
    Await { r#await: u32 },
    /// `_with` takes `len` and `fill`: a fixed argument of either name is renamed.
    #[rpc(response = u32)]
    Fill {
        len: u32,
        fill: u32,
        r#loop: u32,
        data: Bytes,
    },
    /// A streamed reply's `_into` takes the buffer: an argument named as it.
    #[rpc(response = Bytes)]
    Fetch { out: u32, buf: u32, r#in: u8 },
}

struct NamesImpl;

impl NamesServer for NamesImpl {
    fn call(&self, site: u32) -> u32 {
        site + 1
    }
    fn reply(&self, reply: u32) -> u32 {
        reply + 2
    }
    fn error(&self, error: u32) -> u32 {
        error + 3
    }
    fn client(&self, client: u32) -> u32 {
        client + 4
    }
    fn server(&self, server: u32) -> u32 {
        server + 5
    }
    fn service(&self, service: u32) -> u32 {
        service + 6
    }
    fn dispatch(&self, handler: u32, port: u32, buffers: u32) -> u32 {
        handler * 100 + port * 10 + buffers
    }
    fn opcode(&self, opcode: u32) -> u32 {
        opcode + 8
    }
    fn fingerprint(&self, via: u32) -> u32 {
        via + 9
    }
    fn handshake(&self, request: u32, body: u32, later: u32) -> u32 {
        request * 100 + body * 10 + later
    }
    fn result(&self, out: u32) -> u32 {
        out + 11
    }
    fn ok(&self, d: u32, s: u32) -> u32 {
        d * 10 + s
    }
    fn some(&self, c: u32) -> u32 {
        c + 13
    }
    fn none(&self) -> u32 {
        14
    }
    fn self_(&self, self_: u32) -> u32 {
        self_ + 15
    }
    fn r#type(&self, r#type: u32, r#match: u32) -> u32 {
        r#type * 10 + r#match
    }
    fn r#match(&self, r#fn: u32) -> u32 {
        r#fn + 17
    }
    fn r#async(&self, r#async: u32) -> u32 {
        r#async + 18
    }
    fn r#await(&self, r#await: u32) -> u32 {
        r#await + 19
    }
    fn fill(&self, len: u32, fill: u32, r#loop: u32, data: &[u8]) -> u32 {
        len * 1000 + fill * 100 + r#loop * 10 + data.len() as u32
    }
    fn fetch(&self, out: u32, buf: u32, r#in: u8) -> impl AsRef<[u8]> {
        vec![out as u8, buf as u8, r#in]
    }
}

// Tries: a service whose variants are named as the runtime's and std's types (`Call`, `Reply`,
// `Error`, `Client`, `Server`, `Result`, `Ok`, `Some`, `None`, ...), whose methods are keywords
// (`type`, `match`, `async`, `await`: raw identifiers), whose fields are named as the generated
// code's parameters and locals (`handler`, `port`, `buffers`, `len`, `fill`, `out`, `request`,
// `body`, `later`, `self_`, raw `r#type`), served beside another service. Must hold: it compiles,
// and every call reaches its own handler with its own arguments in order.
// (Calls named `Clone`, `AsRef`, `ToOwned`, `Drop`, `Into` or `TryInto` do not compile: a
// defect, shown in derive/tests/user_ui.rs.)
#[test]
fn names_like_the_generated_codes_own_reach_their_handlers() {
    let _watchdog = Watchdog::new("names", Duration::from_secs(60));
    let server = ShmServer::start(
        unique("names"),
        config(true, 4096),
        Names::server(NamesImpl).and(Kinds::server(KindsImpl::default())),
    )
    .unwrap();
    let shm = ShmClient::attach(
        server.path(),
        ClientConfig::default()
            .service::<Names>()
            .service::<Kinds>()
            .deadline(DEADLINE),
    )
    .unwrap();
    let c = Names::client(&shm);
    assert_eq!(c.call(1), Ok(2));
    assert_eq!(c.reply(1), Ok(3));
    assert_eq!(c.error(1), Ok(4));
    assert_eq!(c.client(1), Ok(5));
    assert_eq!(c.server(1), Ok(6));
    assert_eq!(c.service(1), Ok(7));
    assert_eq!(c.dispatch(1, 2, 3), Ok(123));
    assert_eq!(c.opcode(1), Ok(9));
    assert_eq!(c.fingerprint(1), Ok(10));
    assert_eq!(c.handshake(1, 2, 3), Ok(123));
    assert_eq!(c.result(1), Ok(12));
    assert_eq!(c.ok(1, 2), Ok(12));
    assert_eq!(c.some(1), Ok(14));
    assert_eq!(c.none(), Ok(14));
    assert_eq!(c.self_(1), Ok(16));
    assert_eq!(c.r#type(1, 2), Ok(12));
    assert_eq!(c.r#match(1), Ok(18));
    assert_eq!(c.r#async(1), Ok(19));
    assert_eq!(c.r#await(1), Ok(20));
    assert_eq!(c.fill(1, 2, 3, &[0; 4]), Ok(1234));
    assert_eq!(c.fill_with(1, 2, 3, 5, |b| b.fill(9)), Ok(1235));
    assert_eq!(c.fetch(1, 2, 3), Ok(vec![1, 2, 3]));
    let mut buf = [0u8; 3];
    assert_eq!(
        c.fetch_into(4, 5, 6, &mut buf).map(|b| b.to_vec()),
        Ok(vec![4, 5, 6])
    );
    // The other service on the same server still answers.
    assert_eq!(Kinds::client(&shm).byte(1), Ok(2));
    // Each call's constant opcode is the one its variant's value reports.
    assert_eq!(
        Names::OPCODE_TYPE,
        Names::Type {
            r#type: 0,
            r#match: 0
        }
        .opcode()
    );
    assert_eq!(Names::OPCODE_NONE, Names::None.opcode());
    server.shutdown(Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------------
// Many calls, and opcodes at the ends of their range.

/// A service of `$n` calls, each returning its own index, its handler, and a check that calls
/// every one.
macro_rules! many {
    ($($v:ident $m:ident $n:literal),*) => {
        #[derive(RpcOpcodes)]
        #[rpc(service = "test.user.many")]
        pub enum Many {
            $( #[rpc(response = u32)] $v { x: u32 }, )*
        }

        struct ManyImpl;

        impl ManyServer for ManyImpl {
            $( fn $m(&self, x: u32) -> u32 { x ^ $n } )*
        }

        /// Each call made by a function of its own (a function of hundreds of calls, each
        /// inlined, takes minutes to compile), checked to reach its own handler.
        fn check_many(c: &ManyClient<&ShmClient>) -> usize {
            type Call = fn(&ManyClient<&ShmClient>, u32) -> Result<u32, Error>;
            let calls: &[(Call, u32, &str)] = &[$( (|c, x| c.$m(x), $n, stringify!($v)), )*];
            for &(call, n, name) in calls {
                assert_eq!(call(c, 0xabc0_0000), Ok(0xabc0_0000 ^ n), "{name}");
            }
            calls.len()
        }
    };
}

many!(V0 v0 0, V1 v1 1, V2 v2 2, V3 v3 3, V4 v4 4, V5 v5 5, V6 v6 6, V7 v7 7, V8 v8 8, V9 v9 9, V10 v10 10, V11 v11 11, V12 v12 12, V13 v13 13, V14 v14 14, V15 v15 15, V16 v16 16, V17 v17 17, V18 v18 18, V19 v19 19, V20 v20 20, V21 v21 21, V22 v22 22, V23 v23 23, V24 v24 24, V25 v25 25, V26 v26 26, V27 v27 27, V28 v28 28, V29 v29 29, V30 v30 30, V31 v31 31, V32 v32 32, V33 v33 33, V34 v34 34, V35 v35 35, V36 v36 36, V37 v37 37, V38 v38 38, V39 v39 39, V40 v40 40, V41 v41 41, V42 v42 42, V43 v43 43, V44 v44 44, V45 v45 45, V46 v46 46, V47 v47 47, V48 v48 48, V49 v49 49, V50 v50 50, V51 v51 51, V52 v52 52, V53 v53 53, V54 v54 54, V55 v55 55, V56 v56 56, V57 v57 57, V58 v58 58, V59 v59 59, V60 v60 60, V61 v61 61, V62 v62 62, V63 v63 63, V64 v64 64, V65 v65 65, V66 v66 66, V67 v67 67, V68 v68 68, V69 v69 69, V70 v70 70, V71 v71 71, V72 v72 72, V73 v73 73, V74 v74 74, V75 v75 75, V76 v76 76, V77 v77 77, V78 v78 78, V79 v79 79, V80 v80 80, V81 v81 81, V82 v82 82, V83 v83 83, V84 v84 84, V85 v85 85, V86 v86 86, V87 v87 87, V88 v88 88, V89 v89 89, V90 v90 90, V91 v91 91, V92 v92 92, V93 v93 93, V94 v94 94, V95 v95 95, V96 v96 96, V97 v97 97, V98 v98 98, V99 v99 99, V100 v100 100, V101 v101 101, V102 v102 102, V103 v103 103, V104 v104 104, V105 v105 105, V106 v106 106, V107 v107 107, V108 v108 108, V109 v109 109, V110 v110 110, V111 v111 111, V112 v112 112, V113 v113 113, V114 v114 114, V115 v115 115, V116 v116 116, V117 v117 117, V118 v118 118, V119 v119 119, V120 v120 120, V121 v121 121, V122 v122 122, V123 v123 123, V124 v124 124, V125 v125 125, V126 v126 126, V127 v127 127, V128 v128 128, V129 v129 129, V130 v130 130, V131 v131 131, V132 v132 132, V133 v133 133, V134 v134 134, V135 v135 135, V136 v136 136, V137 v137 137, V138 v138 138, V139 v139 139, V140 v140 140, V141 v141 141, V142 v142 142, V143 v143 143, V144 v144 144, V145 v145 145, V146 v146 146, V147 v147 147, V148 v148 148, V149 v149 149, V150 v150 150, V151 v151 151, V152 v152 152, V153 v153 153, V154 v154 154, V155 v155 155, V156 v156 156, V157 v157 157, V158 v158 158, V159 v159 159, V160 v160 160, V161 v161 161, V162 v162 162, V163 v163 163, V164 v164 164, V165 v165 165, V166 v166 166, V167 v167 167, V168 v168 168, V169 v169 169, V170 v170 170, V171 v171 171, V172 v172 172, V173 v173 173, V174 v174 174, V175 v175 175, V176 v176 176, V177 v177 177, V178 v178 178, V179 v179 179, V180 v180 180, V181 v181 181, V182 v182 182, V183 v183 183, V184 v184 184, V185 v185 185, V186 v186 186, V187 v187 187, V188 v188 188, V189 v189 189, V190 v190 190, V191 v191 191, V192 v192 192, V193 v193 193, V194 v194 194, V195 v195 195, V196 v196 196, V197 v197 197, V198 v198 198, V199 v199 199, V200 v200 200, V201 v201 201, V202 v202 202, V203 v203 203, V204 v204 204, V205 v205 205, V206 v206 206, V207 v207 207, V208 v208 208, V209 v209 209, V210 v210 210, V211 v211 211, V212 v212 212, V213 v213 213, V214 v214 214, V215 v215 215, V216 v216 216, V217 v217 217, V218 v218 218, V219 v219 219, V220 v220 220, V221 v221 221, V222 v222 222, V223 v223 223, V224 v224 224, V225 v225 225, V226 v226 226, V227 v227 227, V228 v228 228, V229 v229 229, V230 v230 230, V231 v231 231, V232 v232 232, V233 v233 233, V234 v234 234, V235 v235 235, V236 v236 236, V237 v237 237, V238 v238 238, V239 v239 239, V240 v240 240, V241 v241 241, V242 v242 242, V243 v243 243, V244 v244 244, V245 v245 245, V246 v246 246, V247 v247 247, V248 v248 248, V249 v249 249, V250 v250 250, V251 v251 251, V252 v252 252, V253 v253 253, V254 v254 254, V255 v255 255, V256 v256 256, V257 v257 257, V258 v258 258, V259 v259 259, V260 v260 260, V261 v261 261, V262 v262 262, V263 v263 263, V264 v264 264, V265 v265 265, V266 v266 266, V267 v267 267, V268 v268 268, V269 v269 269, V270 v270 270, V271 v271 271, V272 v272 272, V273 v273 273, V274 v274 274, V275 v275 275, V276 v276 276, V277 v277 277, V278 v278 278, V279 v279 279, V280 v280 280, V281 v281 281, V282 v282 282, V283 v283 283, V284 v284 284, V285 v285 285, V286 v286 286, V287 v287 287, V288 v288 288, V289 v289 289, V290 v290 290, V291 v291 291, V292 v292 292, V293 v293 293, V294 v294 294, V295 v295 295, V296 v296 296, V297 v297 297, V298 v298 298, V299 v299 299);

/// The class scheme from class 0: the first call's opcode is 0. Opcodes given just below the
/// protocol's (0xffffff00 and up) and at 2.
#[derive(RpcOpcodes)]
#[rpc(service = "test.user.class0", class = 0)]
pub enum ClassZero {
    #[rpc(response = u32)]
    First { x: u32 },
    #[rpc(response = u32)]
    Second { x: u32 },
    #[rpc(response = u32, opcode = 0xfffffeff)]
    Top { x: u32 },
    #[rpc(response = u32, opcode = 2)]
    One { x: u32 },
}

struct ClassZeroImpl;

impl ClassZeroServer for ClassZeroImpl {
    fn first(&self, x: u32) -> u32 {
        x + 1
    }
    fn second(&self, x: u32) -> u32 {
        x + 2
    }
    fn top(&self, x: u32) -> u32 {
        x + 3
    }
    fn one(&self, x: u32) -> u32 {
        x + 4
    }
}

// Tries: a service of 300 calls, served beside a class-scheme service whose first call's opcode is
// 0 (and calls at opcodes 2 and 0xfffffeff, the last below the protocol's), and a third service,
// `a.and(b.and(c))` (the nesting to the right), on the inline path and through the packets. Must
// hold: every call of each reaches its own handler (its reply carries its index), and the
// opcodes are those the docs give.
#[test]
fn a_service_of_many_calls_and_opcodes_at_the_ends_round_trip() {
    let _watchdog = Watchdog::new("many", Duration::from_secs(60));
    assert_eq!(<Many as Service>::OPCODES.len(), 300);
    assert_eq!(ClassZero::OPCODE_FIRST, 0);
    assert_eq!(ClassZero::OPCODE_SECOND, 1);
    assert_eq!(ClassZero::OPCODE_ONE, 2);
    assert_eq!(ClassZero::OPCODE_TOP, 0xffff_feff);
    for inline in [true, false] {
        let server = ShmServer::start(
            unique("many"),
            config(inline, 0),
            ClassZero::server(ClassZeroImpl)
                .and(Many::server(ManyImpl).and(Names::server(NamesImpl))),
        );
        let server = server.unwrap();
        let shm = ShmClient::attach(
            server.path(),
            ClientConfig::default()
                .service::<Many>()
                .service::<ClassZero>()
                .service::<Names>()
                .deadline(DEADLINE),
        )
        .unwrap();
        assert_eq!(check_many(&Many::client(&shm)), 300);
        let c = ClassZero::client(&shm);
        assert_eq!(c.first(10), Ok(11));
        assert_eq!(c.second(10), Ok(12));
        assert_eq!(c.top(10), Ok(13));
        assert_eq!(c.one(10), Ok(14));
        assert_eq!(Names::client(&shm).none(), Ok(14));
        server.shutdown(Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Types of one's own of other shapes, limits at their ends, the client's `values` and `hot`.

/// A tuple struct.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair(u32, u32);

/// A generic struct, used at one type.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Boxed<T> {
    value: T,
}

/// Aligned to 32 bytes: packed among the arguments at an offset of 1.
#[wire]
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aligned {
    bytes: [u8; 32],
}

/// `repr(transparent)`.
#[wire]
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Id(u64);

/// Negative and extreme discriminants.
#[wire]
#[repr(i64)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Signed {
    Low = i64::MIN,
    Minus = -1,
    High = i64::MAX,
}

const KIB: usize = 1024;

#[derive(RpcOpcodes)]
#[rpc(service = "test.user.extras")]
pub enum Extras {
    #[rpc(response = Pair)]
    Swap { p: Pair },
    #[rpc(response = Boxed<u64>)]
    Unbox { b: Boxed<[u8; 8]> },
    /// A byte before a 32-aligned struct: the struct's bytes at offset 1 of the request.
    #[rpc(response = Aligned)]
    Align { skew: u8, a: Aligned },
    #[rpc(response = Id)]
    Next { id: Id },
    #[rpc(response = Signed)]
    Negate { s: Signed },
    #[rpc(response = [bool; 3])]
    Flip { b: [bool; 3] },
    /// A data-carrying enum as the error.
    #[rpc(response = u8, error = Shape)]
    Refuse { s: Shape },
    /// The largest limit there is, either way.
    #[rpc(response = Bytes, limit = u64::MAX)]
    Unlimited { data: Bytes },
    /// A `usize` constant expression as the limit; text counted in bytes.
    #[rpc(response = u64, limit = 2 * KIB + 4)]
    Chars { text: Text },
    /// The client's settings that change only how it calls.
    #[rpc(response = u64, values)]
    Values { a: u64, b: [u8; 48] },
    #[rpc(response = [u8; 64], hot)]
    Hot { a: [u8; 64] },
    #[rpc(response = u32, values, hot)]
    Both { a: u32 },
    /// Only a zero-sized argument: a request of no bytes.
    #[rpc(response = u64)]
    Nil { a: () },
    /// A zero-sized reply of one's own.
    #[rpc(response = Nope)]
    Zero,
    /// A streamed reply beside an error of 63 bytes, and beside a zero-sized one.
    #[rpc(response = Bytes, error = BigError)]
    Blob { fail: bool },
    #[rpc(response = Text, error = Nope)]
    Note { fail: bool },
    /// A one-way call with text, and what it left.
    #[rpc(oneway)]
    Log { text: Text },
    #[rpc(response = u64)]
    Logged,
}

#[derive(Default)]
struct ExtrasImpl {
    logged: AtomicU64,
}

impl ExtrasServer for ExtrasImpl {
    fn swap(&self, p: Pair) -> Pair {
        Pair(p.1, p.0)
    }
    fn unbox(&self, b: Boxed<[u8; 8]>) -> Boxed<u64> {
        Boxed {
            value: u64::from_le_bytes(b.value),
        }
    }
    fn align(&self, skew: u8, a: Aligned) -> Aligned {
        Aligned {
            bytes: std::array::from_fn(|i| a.bytes[i] ^ skew),
        }
    }
    fn next(&self, id: Id) -> Id {
        Id(id.0.wrapping_add(1))
    }
    fn negate(&self, s: Signed) -> Signed {
        match s {
            Signed::Low => Signed::High,
            Signed::High => Signed::Low,
            Signed::Minus => Signed::Minus,
        }
    }
    fn flip(&self, b: [bool; 3]) -> [bool; 3] {
        [!b[2], !b[1], !b[0]]
    }
    fn refuse(&self, s: Shape) -> Result<u8, Shape> {
        match s {
            Shape::Dot(0) => Ok(0),
            other => Err(turn(other)),
        }
    }
    fn unlimited(&self, data: &[u8]) -> impl AsRef<[u8]> {
        data.iter().rev().copied().collect::<Vec<u8>>()
    }
    fn chars(&self, text: &str) -> u64 {
        text.chars().count() as u64
    }
    fn values(&self, a: u64, b: [u8; 48]) -> u64 {
        a + b.iter().map(|&x| x as u64).sum::<u64>()
    }
    fn hot(&self, a: [u8; 64]) -> [u8; 64] {
        scramble(a)
    }
    fn both(&self, a: u32) -> u32 {
        a.rotate_left(5)
    }
    fn nil(&self, _a: ()) -> u64 {
        42
    }
    fn zero(&self) -> Nope {
        Nope
    }
    fn blob(&self, fail: bool) -> Result<impl AsRef<[u8]>, BigError> {
        if fail {
            Err(BigError {
                bytes: std::array::from_fn(|i| i as u8),
            })
        } else {
            Ok(vec![7u8; 100])
        }
    }
    fn note(&self, fail: bool) -> Result<impl AsRef<str>, Nope> {
        if fail {
            Err(Nope)
        } else {
            Ok("noted")
        }
    }
    fn log(&self, text: &str) {
        self.logged.fetch_add(text.len() as u64, Ordering::SeqCst);
    }
    fn logged(&self) -> u64 {
        self.logged.load(Ordering::SeqCst)
    }
}

// Tries: a tuple struct, a generic struct, a 32-aligned struct packed at an odd offset, a
// `repr(transparent)` struct, an `i64` enum with extreme discriminants, `[bool; 3]`, a
// data-carrying enum as the error, `limit = u64::MAX`, a `usize` constant expression as a limit
// (text counted in bytes, not chars), the client-only settings `values` and `hot`, and a call
// whose only argument is `()`, inline, through the packets and without a bulk area. Must hold:
// each reply is the handler's; a stream one byte over its limit is refused before any handler
// runs.
#[test]
fn types_of_ones_own_limits_and_client_settings_round_trip() {
    let _watchdog = Watchdog::new("extras", Duration::from_secs(60));
    for (inline, bulk) in [(true, 4096), (false, 4096), (true, 0)] {
        let server = ShmServer::start(
            unique("extras"),
            config(inline, bulk),
            Extras::server(ExtrasImpl::default()),
        )
        .unwrap();
        let shm = ShmClient::attach(
            server.path(),
            ClientConfig::default()
                .service::<Extras>()
                .deadline(DEADLINE),
        )
        .unwrap();
        let c = Extras::client(&shm);
        assert_eq!(c.swap(Pair(1, 2)), Ok(Pair(2, 1)));
        assert_eq!(
            c.unbox(Boxed {
                value: [1, 2, 3, 4, 5, 6, 7, 8]
            }),
            Ok(Boxed {
                value: 0x0807_0605_0403_0201
            })
        );
        let a = Aligned { bytes: pattern(3) };
        assert_eq!(
            c.align(0x5a, a),
            Ok(Aligned {
                bytes: std::array::from_fn(|i| a.bytes[i] ^ 0x5a)
            })
        );
        assert_eq!(c.next(Id(u64::MAX)), Ok(Id(0)));
        assert_eq!(c.negate(Signed::Low), Ok(Signed::High));
        assert_eq!(c.negate(Signed::High), Ok(Signed::Low));
        assert_eq!(c.negate(Signed::Minus), Ok(Signed::Minus));
        assert_eq!(c.flip([true, false, false]), Ok([true, true, false]));
        assert_eq!(c.refuse(Shape::Dot(0)), Ok(0));
        assert_eq!(
            c.refuse(Shape::Rect { w: 1, h: 2 }),
            Err(Error::App(turn(Shape::Rect { w: 1, h: 2 })))
        );
        for n in [0usize, 1, 100, 5000, 300_000] {
            let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
            let back: Vec<u8> = data.iter().rev().copied().collect();
            assert_eq!(c.unlimited(&data), Ok(back), "unlimited {n}");
        }
        // 2 KiB + 4 bytes: 513 four-byte chars pass, with one byte more the call is refused.
        let crabs = "🦀".repeat(513);
        assert_eq!(c.chars(&crabs), Ok(513));
        let over = format!("{crabs}a");
        assert_eq!(c.chars(&over), Err(Error::Status(Status::Rejected)));
        let b: [u8; 48] = pattern(9);
        assert_eq!(
            c.values(7, b),
            Ok(7 + b.iter().map(|&x| x as u64).sum::<u64>())
        );
        let h: [u8; 64] = pattern(11);
        assert_eq!(c.hot(h), Ok(scramble(h)));
        assert_eq!(c.both(0x8000_0001), Ok(0x8000_0001u32.rotate_left(5)));
        assert_eq!(c.nil(()), Ok(42));
        assert_eq!(c.zero(), Ok(Nope));
        assert_eq!(c.blob(false), Ok(vec![7u8; 100]));
        assert_eq!(
            c.blob(true),
            Err(Error::App(BigError {
                bytes: std::array::from_fn(|i| i as u8)
            }))
        );
        assert_eq!(c.note(false), Ok("noted".to_string()));
        assert_eq!(c.note(true), Err(Error::App(Nope)));
        c.log("é🦀").unwrap();
        let watch = std::time::Instant::now();
        while c.logged() != Ok(6) {
            assert!(
                watch.elapsed() < DEADLINE,
                "the one-way call was never served"
            );
            std::thread::yield_now();
        }
        server.shutdown(Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// Service names.

/// A name of exactly 48 bytes (the most a file's table holds), of two-byte characters.
#[derive(RpcOpcodes)]
#[rpc(service = "éééééééééééééééééééééééé")]
pub enum LongName {
    #[rpc(response = u32)]
    Get,
}

struct Constant;

impl LongNameServer for Constant {
    fn get(&self) -> u32 {
        48
    }
}

// Tries: a service named with 48 bytes of two-byte characters, the longest name a server's table
// holds, beside another service. Must hold: a client that checks for it attaches and calls it.
#[test]
fn a_service_name_of_the_longest_length_is_served() {
    let _watchdog = Watchdog::new("long name", Duration::from_secs(60));
    assert_eq!(LongName::NAME.len(), 48);
    let server = ShmServer::start(
        unique("long-name"),
        config(true, 0),
        LongName::server(Constant).and(Extras::server(ExtrasImpl::default())),
    )
    .unwrap();
    let shm = ShmClient::attach(
        server.path(),
        ClientConfig::default()
            .service::<LongName>()
            .service::<Extras>()
            .deadline(DEADLINE),
    )
    .unwrap();
    assert_eq!(LongName::client(&shm).get(), Ok(48));
    assert_eq!(Extras::client(&shm).nil(()), Ok(42));
    server.shutdown(Duration::from_secs(5));
}

/// A handler that lists, beside the services it serves, a service whose name has a NUL byte (the
/// derive refuses such a name at compile time: `derive/tests/ui/service_name_nul.rs`; a
/// hand-written handler's list is checked when its server starts).
struct ListsNulName(ferry_shm::ferry_rpc::service::Serving<Extras, ExtrasImpl>);

impl<M: ferry_shm::ferry_rpc::Mailbox, W: ferry_shm::ferry_rpc::Wait> ferry_shm::Handler<M, W>
    for ListsNulName
{
    fn handle(
        &self,
        port: &mut ferry_shm::ferry_rpc::Port<
            '_,
            '_,
            ferry_shm::ferry_rpc::Server,
            ferry_shm::ferry_rpc::Single,
            M,
            W,
        >,
    ) -> Result<(), ferry_shm::ferry_rpc::Error> {
        ferry_shm::Handler::<M, W>::handle(&self.0, port)
    }
    fn services(&self) -> Vec<(&'static str, u64)> {
        let mut services = ferry_shm::Handler::<M, W>::services(&self.0);
        services.push(("nul\0inside", 1));
        services
    }
}

// Tries: a server whose handler lists a service named with a NUL byte (a table entry's name
// ends at its first NUL, so the name would read back as another, and the bytes after it as a
// corrupt table). Must hold: the server refuses to start, with `BadServices` naming the NUL;
// nothing is left at the path.
#[test]
fn a_service_name_with_a_nul_byte_is_refused_at_start() {
    let _watchdog = Watchdog::new("nul name", Duration::from_secs(60));
    let path = unique("nul-name");
    let started = ShmServer::start(
        &path,
        config(true, 0),
        ListsNulName(Extras::server(ExtrasImpl::default())),
    );
    match started {
        Err(ShmError::BadServices(why)) => assert!(why.contains("NUL"), "{why}"),
        Err(other) => panic!("refused, but not as BadServices: {other}"),
        Ok(server) => {
            server.shutdown(Duration::from_secs(5));
            panic!("a service name with a NUL byte was served");
        }
    }
    assert!(!path.exists(), "a refused server left its file");
}

/// [`SizesImpl`]'s answers from async handlers.
struct SizesAsync;

impl SizesAsyncServer for SizesAsync {
    async fn s1(&self, a: [u8; 1]) -> [u8; 1] {
        scramble(a)
    }
    async fn s32(&self, a: [u8; 32]) -> [u8; 32] {
        scramble(a)
    }
    async fn s39(&self, a: [u8; 39]) -> [u8; 39] {
        scramble(a)
    }
    async fn s40(&self, a: [u8; 40]) -> [u8; 40] {
        scramble(a)
    }
    async fn s41(&self, a: [u8; 41]) -> [u8; 41] {
        tokio::task::yield_now().await;
        scramble(a)
    }
    async fn s56(&self, a: [u8; 56]) -> [u8; 56] {
        scramble(a)
    }
    async fn s57(&self, a: [u8; 57]) -> [u8; 57] {
        scramble(a)
    }
    async fn s63(&self, a: [u8; 63]) -> [u8; 63] {
        scramble(a)
    }
    async fn s64(&self, a: [u8; 64]) -> [u8; 64] {
        tokio::task::yield_now().await;
        scramble(a)
    }
    async fn t40(&self, a: [u8; 39], fail: bool) -> Result<[u8; 39], u8> {
        SizesImpl.t40(a, fail)
    }
    async fn t41(&self, a: [u8; 40], fail: bool) -> Result<[u8; 40], u8> {
        SizesImpl.t41(a, fail)
    }
    async fn t64(&self, a: [u8; 63], fail: bool) -> Result<[u8; 63], [u8; 2]> {
        tokio::task::yield_now().await;
        SizesImpl.t64(a, fail)
    }
    async fn tail(&self, head: [u8; 64], data: &[u8]) -> [u8; 64] {
        tail(head, data)
    }
    async fn odd(&self, head: [u8; 41], data: &[u8]) -> Result<[u64; 2], u8> {
        tokio::task::yield_now().await;
        odd(head, data)
    }
}

// Tries: the line-boundary calls of `Sizes` served by async handlers (tasks answering inline
// calls later, a stream's bytes copied into the task), served beside a blocking service on one
// server (`Sizes::async_server(..).and(Names::server(..))`), with the lines alone (no bulk area),
// a bulk area of one line, and a larger one. Must hold: the same replies as the blocking
// handlers, and the blocking service beside it still answers.
#[test]
fn line_boundary_calls_round_trip_through_async_handlers_beside_blocking_ones() {
    let _watchdog = Watchdog::new("sizes async", Duration::from_secs(120));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (inline, bulk) in [(true, 0), (true, 64), (true, 4096), (false, 0)] {
        let handle = rt.handle().clone();
        let service = Sizes::async_server(SizesAsync, move |task| {
            handle.spawn(task);
        })
        .and(Names::server(NamesImpl));
        let server =
            ShmServer::start(unique("sizes-async"), config(inline, bulk), service).unwrap();
        let shm = ShmClient::attach(
            server.path(),
            ClientConfig::default()
                .service::<Sizes>()
                .service::<Names>()
                .deadline(DEADLINE),
        )
        .unwrap();
        check_sizes(&Sizes::client(&shm), 7 + bulk as u8);
        assert_eq!(Names::client(&shm).dispatch(4, 5, 6), Ok(456));
        server.shutdown(Duration::from_secs(5));
    }
}

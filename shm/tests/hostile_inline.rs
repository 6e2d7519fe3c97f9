//! The inline call path against a hostile peer: a server whose reply words, wide-line tags and
//! statuses lie (played here by the test thread on a copy of a real server's file that no worker
//! serves), a client whose request words, lengths and sequences lie (written straight into a real
//! server's file), and a peer that dies or gives up mid-call. Each must end in a clear error and
//! lose nothing: no byte read past what the caller asked for, no reply taken for another call, no
//! handler run on bytes it must not see, no wait without a deadline.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ferry_demo::{Demo, DemoService, Echoed, Summed};
use ferry_rpc::service::{
    CallSite, Error, InlineCall, Later, Serving, Site, Status, Transport, INLINE_BYTES,
};
use ferry_rpc::{Mailbox, Port, Server, Single, Wait};
use ferry_shm::header::{Geometry, HEADER_SIZE};
use ferry_shm::owner::{current_holder, holder_of, pack, pid_of, ABANDONED};
use ferry_shm::{status, ClientConfig, Handler, ServerConfig, ShmClient, ShmServer};
use ferry_testkit::Watchdog;

mod raw;
use raw::{map_file, word32, word64};

/// The longest any wait of these tests may last before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);
/// The deadline of the calls that must fail at theirs: short, so the tests stay quick.
const SHORT: Duration = Duration::from_millis(150);
/// Payload bytes of a head line, of a wide line (after its tag), and wide lines per port.
const HEAD_BYTES: usize = 40;
const WIDE_BYTES: usize = 56;
const WIDE_LINES: usize = 4;
/// Bytes of each port's bulk area in these tests' servers.
const BULK: usize = 4096;

fn unique(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-test-hostile-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A wide line's tag: the call's sequence, bit 32 for a reply (`inline` module docs).
fn tag(seq: u32, reply: bool) -> u64 {
    seq as u64 | (reply as u64) << 32
}

/// A head line's reply word: sequence, length (16 bits) and status (16 bits).
fn reply_word(seq: u32, len: u64, status: u32) -> u64 {
    seq as u64 | (len & 0xffff) << 32 | (status as u64) << 48
}

/// Word 1 of a head line: request bytes, reply bytes read, body length, body in the lines.
fn lens(len: u64, want: u64, body: u64, in_lines: bool) -> u64 {
    len | want << 16 | (in_lines as u64) << 31 | body << 32
}

/// 264 bytes (a head line's and every wide line's payload) none of which is zero, different for
/// each `seed`.
fn pattern(seed: u8) -> Vec<u8> {
    (0..HEAD_BYTES + WIDE_LINES * WIDE_BYTES)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// `bytes[..n]` followed by zeros up to `want` bytes: what a caller reading `want` bytes of a
/// reply of `n` bytes must get.
fn cut(bytes: &[u8], n: usize, want: usize) -> Vec<u8> {
    (0..want)
        .map(|i| if i < n { bytes[i] } else { 0 })
        .collect()
}

fn echoed_from(bytes: &[u8]) -> Echoed {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    Echoed {
        id: word(0),
        mix: word(8),
    }
}

fn echo_bytes(id: u64) -> Vec<u8> {
    let mut b = id.to_le_bytes().to_vec();
    b.extend_from_slice(&ferry_demo::mix(id).to_le_bytes());
    b
}

/// A request pending on a head line, as the fake server saw it.
#[derive(Clone, Copy, Debug)]
struct Pending {
    port: usize,
    seq: u32,
    opcode: u32,
    /// The request's first payload word.
    first: u64,
}

/// A server's file that no worker serves: a copy of a real demo server's file (its header, its
/// services table), served by the test thread, which answers each request as it likes. Its
/// process is this test's (alive) or the one given.
struct Fake {
    path: PathBuf,
    map: memmap2::MmapRaw,
    g: Geometry,
}

impl Fake {
    /// A fake server's file, its server the process `server` (pid, start time), or this one.
    fn new(tag: &str, server: Option<(u32, u64)>) -> Fake {
        let real_path = unique(&format!("{tag}-real"));
        let config = ServerConfig {
            workers: 1,
            bulk: BULK,
            ..ServerConfig::default()
        };
        let real = ShmServer::start(&real_path, config, Demo::server(DemoService)).unwrap();
        let g = *real.geometry();
        let mut bytes = std::fs::read(&real_path).unwrap();
        // (A copy taken while serving: the state word says SERVING.)
        real.shutdown(DEADLINE);
        let g = match server {
            None => g,
            Some((pid, start)) => {
                let other =
                    Geometry::new(g.layout().ports(), g.layout().lanes(), g.fingerprint(), pid)
                        .unwrap()
                        .with_bulk(g.bulk() as u64)
                        .unwrap()
                        .with_inline(true)
                        .with_services(g.services())
                        .with_calls(g.calls_bytes())
                        .with_server_start(start);
                assert_eq!(other.services_offset(), g.services_offset());
                assert_eq!(other.file_size(), g.file_size());
                bytes[..HEADER_SIZE].copy_from_slice(&other.encode());
                other
            }
        };
        let path = unique(tag);
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .unwrap();
            f.write_all(&bytes).unwrap();
        }
        let map = map_file(&path);
        Fake { path, map, g }
    }

    fn client(&self, deadline: Duration, sticky: bool) -> ShmClient {
        ShmClient::attach(
            &self.path,
            ClientConfig::default()
                .service::<Demo>()
                .deadline(deadline)
                .sticky(sticky),
        )
        .unwrap()
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        word64(&self.map, at)
    }

    fn head(&self, port: usize) -> usize {
        self.g.inline_lines_offset() + port * 64
    }

    fn wide(&self, port: usize, i: usize) -> usize {
        self.g.inline_wide_offset() + (port * WIDE_LINES + i) * 64
    }

    fn owner(&self, port: usize) -> u64 {
        self.word(self.g.owners_offset() + port * 8)
            .load(Ordering::SeqCst)
    }

    /// The request and reply sequences of `port`'s head line.
    fn sequences(&self, port: usize) -> (u32, u32) {
        let head = self.head(port);
        (
            self.word(head).load(Ordering::Acquire) as u32,
            self.word(head + 16).load(Ordering::Acquire) as u32,
        )
    }

    /// Waits for a request pending on any port's head line.
    fn pending(&self) -> Pending {
        let until = Instant::now() + DEADLINE;
        loop {
            for port in 0..self.g.layout().ports() as usize {
                // Only a held port's request is a call in flight (a given-up one's stays
                // pending: nobody takes it back here).
                let holder = holder_of(self.owner(port));
                if holder == 0 || holder == ABANDONED {
                    continue;
                }
                let head = self.head(port);
                let request = self.word(head).load(Ordering::Acquire);
                if request as u32 != self.word(head + 16).load(Ordering::Acquire) as u32 {
                    return Pending {
                        port,
                        seq: request as u32,
                        opcode: (request >> 32) as u32,
                        first: self.word(head + 24).load(Ordering::Relaxed),
                    };
                }
            }
            assert!(Instant::now() < until, "no request came");
            std::thread::yield_now();
        }
    }

    /// Writes a reply as a worker would (or would not): `bytes` (up to 264) into the head's
    /// payload and the wide lines, `tags[i]` into wide line `i`'s tag after its bytes, then the
    /// head's reply word `word`, last, with release.
    fn reply(&self, port: usize, bytes: &[u8], tags: &[u64], word: u64) {
        let put = |at: usize, chunk: &[u8]| {
            for (k, w) in chunk.chunks(8).enumerate() {
                let mut le = [0u8; 8];
                le[..w.len()].copy_from_slice(w);
                self.word(at + k * 8)
                    .store(u64::from_le_bytes(le), Ordering::Relaxed);
            }
        };
        for i in 0..WIDE_LINES {
            let from = HEAD_BYTES + i * WIDE_BYTES;
            if bytes.len() > from {
                put(
                    self.wide(port, i) + 8,
                    &bytes[from..bytes.len().min(from + WIDE_BYTES)],
                );
            }
        }
        for (i, &t) in tags.iter().enumerate() {
            self.word(self.wide(port, i)).store(t, Ordering::Release);
        }
        put(self.head(port) + 24, &bytes[..bytes.len().min(HEAD_BYTES)]);
        self.word(self.head(port) + 16)
            .store(word, Ordering::Release);
    }

    /// Answers the next request as a right server answers an echo.
    fn answer_echo(&self) -> Pending {
        let p = self.pending();
        assert_eq!(p.opcode, Demo::OPCODE_ECHO);
        self.reply(
            p.port,
            &echo_bytes(p.first),
            &[],
            reply_word(p.seq, 16, status::OK),
        );
        p
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One raw inline call on a claim of `shm`: `request` out, the first `reply.len()` bytes of the
/// reply into `reply`; its status, or the call's error as the handle reports it.
fn raw_inline(
    shm: &ShmClient,
    opcode: u32,
    request: &[u8],
    reply: &mut [u8],
) -> Result<u32, Error> {
    Site::call(shm, None, |claim| {
        let inline = CallSite::inline(claim).expect("the server serves inline calls");
        match inline.call_inline(opcode, request, reply) {
            Some(Ok(status)) => Ok(status),
            Some(Err(e)) => Err(e.into()),
            None => panic!("a call of {} bytes each way went elsewhere", reply.len()),
        }
    })
}

/// ATTACK: a server whose reply word says the reply is longer than INLINE_BYTES (up to 0xffff),
/// or longer than the bytes the client asked for, on the head-line path (a fixed reply of 16
/// bytes, the client's word-for-word copy) and on the wide path (48, 100 and 256 bytes asked).
/// MUST HOLD: the client reads its own length and no byte more (nothing past the caller's buffer
/// is written, nothing past the lines read): the reply is the first bytes the lines hold.
#[test]
fn a_reply_longer_than_the_lines_or_than_asked_is_read_to_the_callers_length() {
    let _w = Watchdog::new("hostile reply length", Duration::from_secs(120));
    let fake = Fake::new("long-reply", None);
    let shm = fake.client(DEADLINE, true);
    let demo = Demo::client(&shm);
    for (i, len) in [0xffffu64, 257, 256, 17].into_iter().enumerate() {
        let id = 0x1000 + i as u64;
        let got = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id));
            let p = fake.pending();
            let mut bytes = echo_bytes(id);
            // Junk after the reply's 16 bytes: in the lines, within the lying length.
            bytes.extend_from_slice(&pattern(i as u8)[16..]);
            let tags = [tag(p.seq, true); WIDE_LINES];
            fake.reply(p.port, &bytes, &tags, reply_word(p.seq, len, status::OK));
            call.join().unwrap()
        });
        assert_eq!(got, Ok(echoed_from(&echo_bytes(id))), "length {len:#x}");
    }
    for (i, (want, len)) in [(48usize, 0xffffu64), (100, 257), (256, 0xffff), (40, 41)]
        .into_iter()
        .enumerate()
    {
        let bytes = pattern(0x40 + i as u8);
        // The caller's buffer inside a larger one: nothing past its end may change.
        let mut buf = vec![0x5au8; INLINE_BYTES + 64];
        let got = std::thread::scope(|s| {
            let call = s.spawn(|| raw_inline(&shm, 77, &[1, 2, 3], &mut buf[..want]));
            let p = fake.pending();
            let tags = [tag(p.seq, true); WIDE_LINES];
            fake.reply(p.port, &bytes, &tags, reply_word(p.seq, len, status::OK));
            call.join().unwrap()
        });
        assert_eq!(got, Ok(status::OK), "want {want}, length {len:#x}");
        assert_eq!(&buf[..want], &bytes[..want], "want {want}, length {len:#x}");
        assert!(
            buf[want..].iter().all(|&b| b == 0x5a),
            "want {want}: bytes past the caller's buffer written"
        );
    }
}

/// ATTACK: a server whose reply word says the reply is shorter than the client asked for (0, 3, 8
/// and 15 bytes of a 16-byte echo; 39 of 40; 41 and 97 of 100 on the wide path), with the head
/// and wide lines full of other bytes (what the request, or an earlier call, left there).
/// MUST HOLD: every byte at or past the reply's length reads as zero, on the word-for-word path
/// of a reply within the head as on the masked one: the client never takes the bytes that lie
/// past the reply for it.
#[test]
fn a_reply_shorter_than_asked_reads_zero_past_its_length() {
    let _w = Watchdog::new("hostile short reply", Duration::from_secs(120));
    let fake = Fake::new("short-reply", None);
    let shm = fake.client(DEADLINE, true);
    let demo = Demo::client(&shm);
    for (i, len) in [0usize, 3, 8, 15].into_iter().enumerate() {
        let id = 0x0102_0304_0506_0708 + i as u64;
        let junk = pattern(0x80 + i as u8);
        let got = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id));
            let p = fake.pending();
            fake.reply(
                p.port,
                &junk,
                &[],
                reply_word(p.seq, len as u64, status::OK),
            );
            call.join().unwrap()
        });
        assert_eq!(got, Ok(echoed_from(&cut(&junk, len, 16))), "length {len}");
    }
    // With nothing written by the server but the reply word: the head still holds the request.
    let got = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(u64::MAX));
        let p = fake.pending();
        fake.word(fake.head(p.port) + 16)
            .store(reply_word(p.seq, 0, status::OK), Ordering::Release);
        call.join().unwrap()
    });
    assert_eq!(
        got,
        Ok(Echoed { id: 0, mix: 0 }),
        "the request read as its reply"
    );
    for (i, (want, len)) in [(40usize, 39usize), (100, 41), (100, 97), (256, 0)]
        .into_iter()
        .enumerate()
    {
        let junk = pattern(0xc0 + i as u8);
        let mut buf = vec![0x5au8; want];
        let got = std::thread::scope(|s| {
            let call = s.spawn(|| raw_inline(&shm, 77, &junk[..64], &mut buf));
            let p = fake.pending();
            let tags = [tag(p.seq, true); WIDE_LINES];
            fake.reply(
                p.port,
                &junk,
                &tags,
                reply_word(p.seq, len as u64, status::OK),
            );
            call.join().unwrap()
        });
        assert_eq!(got, Ok(status::OK));
        assert_eq!(buf, cut(&junk, len, want), "want {want}, length {len}");
    }
}

/// ATTACK: a server whose status is out of ferry's range (7, 0x1234, 0xffff), or a code of the
/// packets' handshake (FINGERPRINT_MISMATCH), or each error it defines, with a reply's bytes.
/// MUST HOLD: the typed call fails with the status (named in its text), never returns the bytes
/// as a result; the exchange is over (the line at rest), so a sticky handle keeps its port and
/// its next call is answered there.
#[test]
fn a_status_out_of_range_is_an_error_and_the_port_serves_on() {
    let _w = Watchdog::new("hostile status", Duration::from_secs(120));
    let fake = Fake::new("status", None);
    let shm = fake.client(DEADLINE, true);
    let demo = Demo::client(&shm);
    let cases = [
        (7u32, Status::Other(7)),
        (0x1234, Status::Other(0x1234)),
        (0xffff, Status::Other(0xffff)),
        (
            status::FINGERPRINT_MISMATCH,
            Status::Other(status::FINGERPRINT_MISMATCH),
        ),
        (
            status::UNKNOWN_OPCODE,
            Status::UnknownOpcode {
                opcode: Demo::OPCODE_ECHO,
            },
        ),
        (status::REJECTED, Status::Rejected),
        (status::BAD_REQUEST, Status::BadRequest),
        (status::SERVER_ERROR, Status::ServerError),
    ];
    let mut port = None;
    for (i, (code, expected)) in cases.into_iter().enumerate() {
        let id = 500 + i as u64;
        let (got, p) = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id));
            let p = fake.pending();
            fake.reply(p.port, &echo_bytes(id), &[], reply_word(p.seq, 16, code));
            (call.join().unwrap(), p)
        });
        assert_eq!(got, Err(Error::Status(expected)), "status {code:#x}");
        if let Status::Other(code) = expected {
            let said = got.unwrap_err().to_string();
            assert!(said.contains(&code.to_string()), "status {code}: {said}");
        }
        // Kept, at rest, the same port every time.
        let (request, last) = fake.sequences(p.port);
        assert_eq!(request, last);
        assert_eq!(shm.held_port(), Some(p.port as u32), "status {code:#x}");
        assert_eq!(*port.get_or_insert(p.port), p.port);
        let ok = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id + 100));
            let q = fake.answer_echo();
            assert_eq!(q.port, p.port);
            call.join().unwrap()
        });
        assert_eq!(ok, Ok(echoed_from(&echo_bytes(id + 100))));
    }
}

/// ATTACK: a server that answers "not inline" (NOT_INLINE) with a reply's bytes beside it.
/// MUST HOLD: the bytes are never the call's result: the call goes to the packets (which nobody
/// serves here, so it fails at its deadline with a transport error, not an answer).
#[test]
fn a_not_inline_answer_is_never_taken_as_a_reply() {
    let _w = Watchdog::new("hostile not-inline", Duration::from_secs(120));
    let fake = Fake::new("not-inline", None);
    let shm = fake.client(SHORT, false);
    let demo = Demo::client(&shm);
    let got = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(9));
        let p = fake.pending();
        fake.reply(
            p.port,
            &echo_bytes(9),
            &[],
            reply_word(p.seq, 16, status::NOT_INLINE),
        );
        let got = call.join().unwrap();
        assert_eq!(fake.sequences(p.port).0, p.seq, "a second inline request");
        got
    });
    assert_eq!(got, Err(Error::Transport(Transport::Deadline)));
}

/// ATTACK: a server whose reply word carries another call's sequence (the previous one, the
/// next one, one with its top bit flipped), with the right bytes and a right status.
/// MUST HOLD: the client never takes it: the call fails at its deadline (`Deadline`), its port
/// is given up (abandoned, for the server to take back), and the handle's next call, on another
/// port, gets its own reply.
#[test]
fn a_reply_of_another_calls_sequence_is_never_taken() {
    let _w = Watchdog::new("hostile reply sequence", Duration::from_secs(120));
    let fake = Fake::new("other-seq", None);
    let shm = fake.client(SHORT, true);
    let demo = Demo::client(&shm);
    let mut abandoned = Vec::new();
    let others: [fn(u32) -> u32; 3] = [
        |s| s.wrapping_sub(1),
        |s| s.wrapping_add(1),
        |s| s ^ 0x8000_0000,
    ];
    for (i, other) in others.into_iter().enumerate() {
        let id = 40 + i as u64;
        let (got, p) = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id));
            let p = fake.pending();
            fake.reply(
                p.port,
                &echo_bytes(id),
                &[],
                reply_word(other(p.seq), 16, status::OK),
            );
            (call.join().unwrap(), p)
        });
        assert_eq!(got, Err(Error::Transport(Transport::Deadline)), "case {i}");
        assert_eq!(pid_of(fake.owner(p.port)), ABANDONED, "case {i}");
        assert!(!abandoned.contains(&p.port));
        abandoned.push(p.port);
        // The next call claims another port and gets its own reply.
        let ok = std::thread::scope(|s| {
            let call = s.spawn(|| demo.echo(id + 1000));
            let q = fake.answer_echo();
            assert!(!abandoned.contains(&q.port), "an abandoned port used again");
            call.join().unwrap()
        });
        assert_eq!(ok, Ok(echoed_from(&echo_bytes(id + 1000))));
    }
}

/// ATTACK: a server that hands back the head's reply word for the right call, but leaves one wide
/// line the client reads tagged for something else: the previous call's reply, the request
/// itself (a line the server never wrote), a tag with stray high bits, zero.
/// MUST HOLD: the client never reads such a line: the call fails at its deadline, the caller's
/// buffer holds none of the line's bytes as a result; with every line it reads tagged right
/// (all four, or only the one a 48-byte reply reaches, the others wrong), it gets the reply.
#[test]
fn a_wide_reply_line_without_the_calls_tag_is_never_read() {
    let _w = Watchdog::new("hostile wide tags", Duration::from_secs(120));
    let fake = Fake::new("wide-tags", None);
    let shm = fake.client(SHORT, false);
    let bad: [fn(u32) -> u64; 4] = [
        |s| tag(s.wrapping_sub(1), true),
        |s| tag(s, false),
        |s| tag(s, true) | 1 << 40,
        |_| 0,
    ];
    for (i, bad) in bad.into_iter().enumerate() {
        for line in [0, WIDE_LINES - 1] {
            let bytes = pattern(i as u8 * 8 + line as u8);
            let mut buf = vec![0u8; INLINE_BYTES];
            let got = std::thread::scope(|s| {
                let call = s.spawn(|| raw_inline(&shm, 77, &[7; 8], &mut buf));
                let p = fake.pending();
                let mut tags = [tag(p.seq, true); WIDE_LINES];
                tags[line] = bad(p.seq);
                fake.reply(p.port, &bytes, &tags, reply_word(p.seq, 256, status::OK));
                call.join().unwrap()
            });
            assert_eq!(
                got,
                Err(Error::Transport(Transport::Deadline)),
                "case {i}, line {line}"
            );
        }
    }
    // Right tags on the lines a reply reaches, whatever the others say: answered.
    for (want, right) in [(INLINE_BYTES, WIDE_LINES), (48, 1)] {
        let bytes = pattern(0x33);
        let mut buf = vec![0u8; want];
        let got = std::thread::scope(|s| {
            let call = s.spawn(|| raw_inline(&shm, 77, &[7; 8], &mut buf));
            let p = fake.pending();
            let mut tags = [tag(p.seq, false); WIDE_LINES];
            tags[..right].fill(tag(p.seq, true));
            fake.reply(
                p.port,
                &bytes,
                &tags,
                reply_word(p.seq, want as u64, status::OK),
            );
            call.join().unwrap()
        });
        assert_eq!(got, Ok(status::OK), "want {want}");
        assert_eq!(&buf[..], &bytes[..want], "want {want}");
    }
}

/// ATTACK: a server that answers a request before it was made: it writes the next sequence's
/// reply word (and a reply) while the line is at rest, between two calls of a sticky handle.
/// MUST HOLD: the client's next call sees the line is not at rest and fails at once with a
/// protocol error, writing no request (the request word stays as it was) and taking no reply; its
/// port is given up; the call after it, on another port, gets its own reply.
#[test]
fn a_reply_written_before_its_request_is_refused() {
    let _w = Watchdog::new("hostile early reply", Duration::from_secs(120));
    let fake = Fake::new("early-reply", None);
    let shm = fake.client(DEADLINE, true);
    let demo = Demo::client(&shm);
    let first = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(1));
        let p = fake.answer_echo();
        assert_eq!(call.join().unwrap(), Ok(echoed_from(&echo_bytes(1))));
        p
    });
    let port = first.port;
    assert_eq!(shm.held_port(), Some(port as u32));
    // The next call's reply, early.
    fake.reply(
        port,
        &echo_bytes(2),
        &[],
        reply_word(first.seq.wrapping_add(1), 16, status::OK),
    );
    // (A protocol error, not the deadline's: it did not wait.)
    let got = demo.echo(2);
    assert_eq!(
        got,
        Err(Error::Transport(Transport::Protocol(
            ferry_rpc::Error::Stalled
        )))
    );
    assert_eq!(
        fake.word(fake.head(port)).load(Ordering::Acquire) as u32,
        first.seq,
        "a request was written on a line that was not at rest"
    );
    assert_eq!(pid_of(fake.owner(port)), ABANDONED);
    let ok = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(3));
        let q = fake.answer_echo();
        assert_ne!(q.port, port);
        call.join().unwrap()
    });
    assert_eq!(ok, Ok(echoed_from(&echo_bytes(3))));
}

/// ATTACK: the server dies mid-call: its process is killed while the client waits for a reply
/// (the server's file is a fake whose server process is a child of this test), or it stops
/// (its state word STOPPED) without answering.
/// MUST HOLD: the call fails with `NoServer` long before its deadline (a minute), not a hang.
#[test]
fn a_server_that_dies_mid_call_fails_the_call_with_no_server() {
    let _w = Watchdog::new("server dies mid-call", Duration::from_secs(120));
    let mut child = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = ferry_shm::owner::start_time(pid).unwrap();
    let fake = Fake::new("dies", Some((pid, start)));
    let shm = fake.client(Duration::from_secs(60), false);
    let demo = Demo::client(&shm);
    // (At a minute's deadline: a call that waited it out would end in `Deadline`.)
    let got = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(5));
        let p = fake.pending();
        assert_eq!(p.opcode, Demo::OPCODE_ECHO);
        child.kill().unwrap();
        child.wait().unwrap();
        call.join().unwrap()
    });
    assert_eq!(got, Err(Error::Transport(Transport::NoServer)));

    let fake = Fake::new("stops", None);
    let shm = fake.client(Duration::from_secs(60), false);
    let demo = Demo::client(&shm);
    let got = std::thread::scope(|s| {
        let call = s.spawn(|| demo.echo(6));
        fake.pending();
        // The state word (byte 84 of the header): STOPPED.
        word32(&fake.map, 84).store(ferry_shm::header::STATE_STOPPED, Ordering::SeqCst);
        call.join().unwrap()
    });
    assert_eq!(got, Err(Error::Transport(Transport::NoServer)));
}

/// A real demo server's file, mapped, with port `port` claimed and armed by hand (as a client
/// would), for raw requests: `call` writes one and returns the reply word.
struct RawClient {
    server: Option<ShmServer>,
    map: memmap2::MmapRaw,
    g: Geometry,
    port: usize,
}

impl RawClient {
    fn new(tag: &str, config: ServerConfig, port: usize) -> RawClient {
        let server = ShmServer::start(unique(tag), config, Demo::server(DemoService)).unwrap();
        let g = *server.geometry();
        let map = map_file(server.path());
        let me = current_holder().unwrap();
        word64(&map, g.owners_offset() + port * 8).store(pack(1, me), Ordering::SeqCst);
        word32(&map, g.inline_offset() + port / 32 * 4)
            .fetch_or(1 << (port % 32), Ordering::SeqCst);
        RawClient {
            server: Some(server),
            map,
            g,
            port,
        }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        word64(&self.map, at)
    }

    fn head(&self) -> usize {
        self.g.inline_lines_offset() + self.port * 64
    }

    fn wide(&self, i: usize) -> usize {
        self.g.inline_wide_offset() + (self.port * WIDE_LINES + i) * 64
    }

    /// Writes `bytes` into the head's payload and the wide lines they reach (each tagged as
    /// request `seq`), the lengths word, then the request word; waits for the reply word of
    /// `seq` and returns it.
    fn call(&self, opcode: u32, lens: u64, bytes: &[u8], seq: u32) -> u64 {
        let put = |at: usize, chunk: &[u8]| {
            for (k, w) in chunk.chunks(8).enumerate() {
                let mut le = [0u8; 8];
                le[..w.len()].copy_from_slice(w);
                self.word(at + k * 8)
                    .store(u64::from_le_bytes(le), Ordering::Relaxed);
            }
        };
        for i in 0..WIDE_LINES {
            let from = HEAD_BYTES + i * WIDE_BYTES;
            if bytes.len() > from {
                put(
                    self.wide(i) + 8,
                    &bytes[from..bytes.len().min(from + WIDE_BYTES)],
                );
                self.word(self.wide(i))
                    .store(tag(seq, false), Ordering::Relaxed);
            }
        }
        put(self.head() + 24, &bytes[..bytes.len().min(HEAD_BYTES)]);
        self.word(self.head() + 8).store(lens, Ordering::Relaxed);
        self.word(self.head())
            .store((opcode as u64) << 32 | seq as u64, Ordering::Release);
        let until = Instant::now() + DEADLINE;
        loop {
            let answer = self.word(self.head() + 16).load(Ordering::Acquire);
            if answer as u32 == seq {
                return answer;
            }
            assert!(Instant::now() < until, "request {seq} never answered");
            std::thread::yield_now();
        }
    }

    /// The head payload's words, as they are now.
    fn payload(&self) -> Vec<u64> {
        (3..8)
            .map(|w| self.word(self.head() + w * 8).load(Ordering::Acquire))
            .collect()
    }

    /// Ends the claim and stops the server: its counters.
    fn finish(mut self) -> ferry_shm::ServerStats {
        self.word(self.g.owners_offset() + self.port * 8)
            .store(pack(1, 0), Ordering::SeqCst);
        self.server.take().unwrap().shutdown(DEADLINE).stats
    }
}

fn status_of(word: u64) -> u32 {
    (word >> 48) as u32
}

fn len_of(word: u64) -> u64 {
    word >> 32 & 0xffff
}

/// ATTACK: a client whose request sequence jumps: forward by a thousand, back below the last
/// reply's, to u32::MAX and over it to 0, then 1 again, against a lone worker (which answers on
/// the sequence words of its first look, taking no lock) and against two.
/// MUST HOLD: a sequence other than the last reply's is a request, whatever its distance: each
/// is answered exactly once, with its own sequence and its own bytes, and the line comes to rest.
#[test]
fn request_sequences_that_jump_or_wrap_are_each_answered_once() {
    let _w = Watchdog::new("hostile sequences", Duration::from_secs(120));
    let seqs = [1u32, 2, 1002, 7, u32::MAX, 0, 1];
    for workers in [1, 2] {
        let config = ServerConfig {
            workers,
            bulk: BULK,
            ..ServerConfig::default()
        };
        let raw = RawClient::new("jumps", config, 5);
        for &seq in &seqs {
            let id = 0xabcd_0000 + seq as u64;
            let answer = raw.call(
                Demo::OPCODE_ECHO,
                lens(8, 16, 0, false),
                &id.to_le_bytes(),
                seq,
            );
            assert_eq!(
                status_of(answer),
                status::OK,
                "{workers} workers, seq {seq}"
            );
            assert_eq!(len_of(answer), 16);
            let head = raw.payload();
            assert_eq!(
                echoed_from(&[head[0].to_le_bytes(), head[1].to_le_bytes()].concat()),
                echoed_from(&echo_bytes(id)),
                "{workers} workers, seq {seq}"
            );
            let request = raw.word(raw.head()).load(Ordering::Acquire) as u32;
            assert_eq!(request, seq);
        }
        // Nothing more is answered: each request ran its handler once.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(raw.word(raw.head() + 16).load(Ordering::Acquire) as u32, 1);
        let stats = raw.finish();
        assert_eq!(
            (stats.inline, stats.served, stats.failed),
            (seqs.len() as u64, seqs.len() as u64, 0),
            "{workers} workers"
        );
    }
}

/// ATTACK: a client that announces a body in the port's bulk area on a server that has no bulk
/// areas (1 byte, 4 KiB, u32::MAX bytes), for a call that takes a body and for one that takes
/// none.
/// MUST HOLD: refused with BAD_REQUEST before anything is read (there is no area: reading it
/// would dereference nothing) and before any handler runs; a body in the lines is served right,
/// and so are the typed client's streams (in the lines, or through the packets when longer).
#[test]
fn a_body_in_a_bulk_area_the_server_lacks_is_refused() {
    let _w = Watchdog::new("hostile body without bulk", Duration::from_secs(120));
    let config = ServerConfig {
        bulk: 0,
        ..ServerConfig::default()
    };
    let raw = RawClient::new("no-bulk", config, 9);
    assert_eq!(raw.g.bulk(), 0);
    let sum = Demo::OPCODE_SUM;
    let mut seq = 0;
    let mut call = |opcode, lens, bytes: &[u8]| {
        seq += 1;
        raw.call(opcode, lens, bytes, seq)
    };
    for body in [1u64, 4096, u32::MAX as u64] {
        let answer = call(sum, lens(0, 16, body, false), &[]);
        assert_eq!(status_of(answer), status::BAD_REQUEST, "body {body}");
        assert_eq!(len_of(answer), 0);
        let answer = call(Demo::OPCODE_ECHO, lens(8, 16, body, false), &[1; 8]);
        assert_eq!(status_of(answer), status::BAD_REQUEST, "body {body}");
    }
    // A body of 5 bytes in the lines: served.
    let answer = call(sum, lens(5, 16, 5, true), &[1, 2, 3, 4, 5]);
    assert_eq!(status_of(answer), status::OK);
    let head = raw.payload();
    assert_eq!((head[0], head[1]), (5, 15));
    let shm = ShmClient::attach(
        raw.server.as_ref().unwrap().path(),
        ClientConfig::default().service::<Demo>().deadline(DEADLINE),
    )
    .unwrap();
    let c = Demo::client(&shm);
    assert_eq!(c.sum(&[9; 30]), Ok(Summed { len: 30, sum: 270 }));
    assert_eq!(
        c.sum(&[2; 3000]),
        Ok(Summed {
            len: 3000,
            sum: 6000
        })
    );
    drop(shm);
    let stats = raw.finish();
    // Dispatched: the body in the lines and the two typed streams; the six refused never were.
    assert_eq!((stats.served, stats.failed, stats.panicked), (3, 0, 0));
}

/// ATTACK: a client that asks for the whole 256 bytes of reply for calls whose reply is 16 bytes
/// (an echo) or none at all (an unknown opcode; an echo of a length it does not take), every
/// line it reads full of other bytes beforehand (an earlier request of 256 bytes that asked for
/// no reply, so that the worker wrote nothing over them).
/// MUST HOLD: the worker hands back every line the client reads (each tagged with the call's
/// reply tag: else the client would wait to its deadline), and the client reads the reply's
/// bytes then zeros: nothing of the earlier request is taken for the reply.
#[test]
fn a_short_reply_to_a_long_ask_hands_back_every_line_and_reads_zero_past_it() {
    let _w = Watchdog::new("hostile long ask", Duration::from_secs(120));
    for workers in [1, 2] {
        let config = ServerConfig {
            workers,
            bulk: BULK,
            ..ServerConfig::default()
        };
        let server =
            ShmServer::start(unique("long-ask"), config, Demo::server(DemoService)).unwrap();
        let g = *server.geometry();
        let map = map_file(server.path());
        let shm = ShmClient::attach(
            server.path(),
            ClientConfig::default().deadline(DEADLINE).sticky(true),
        )
        .unwrap();
        let junk = pattern(0x77);
        let id = 0x0101_0101_0101_0101u64;
        for (opcode, len, expected, reply) in [
            (Demo::OPCODE_ECHO, 8, status::OK, echo_bytes(id)),
            (0x1234_5678, 200, status::UNKNOWN_OPCODE, vec![]),
            (Demo::OPCODE_ECHO, 256, status::BAD_REQUEST, vec![]),
        ] {
            let case = format!("{workers} workers, opcode {opcode:#x}, {len} bytes");
            let filled = raw_inline(&shm, 0x0bad, &junk[..INLINE_BYTES], &mut []);
            assert_eq!(filled, Ok(status::UNKNOWN_OPCODE), "{case}");
            let port = shm.held_port().unwrap() as usize;
            let line = |i: usize| g.inline_wide_offset() + (port * WIDE_LINES + i) * 64;
            let mut request = junk.clone();
            request[..8].copy_from_slice(&id.to_le_bytes());
            let mut buf = vec![0x5au8; INLINE_BYTES];
            let got = raw_inline(&shm, opcode, &request[..len], &mut buf);
            assert_eq!(got, Ok(expected), "{case}");
            assert_eq!(buf, cut(&reply, reply.len(), INLINE_BYTES), "{case}");
            let head = g.inline_lines_offset() + port * 64;
            let seq = word64(&map, head + 16).load(Ordering::Acquire) as u32;
            for i in 0..WIDE_LINES {
                let t = word64(&map, line(i)).load(Ordering::Acquire);
                assert_eq!(t, tag(seq, true), "{case}: line {i} not handed back");
            }
        }
        drop(shm);
        let stats = server.shutdown(DEADLINE).stats;
        assert_eq!((stats.failed, stats.panicked), (0, 0));
    }
}

/// The demo service whose inline `sum` of a body starting 0xe7 waits until the gate opens, then
/// records whether the body, read in place in the port's bulk area, is still the one it got.
struct GatedSum {
    gate: Arc<(Mutex<bool>, Condvar)>,
    intact: Arc<Mutex<Option<bool>>>,
    demo: Serving<Demo, DemoService>,
}

impl<M: Mailbox, W: Wait> Handler<M, W> for GatedSum {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        self.demo.handle(port)
    }
    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        if opcode == Demo::OPCODE_SUM && body.first() == Some(&0xe7) {
            // (Volatile reads: the bytes lie in memory another process may write.)
            let read = |body: &[u8]| -> Vec<u8> {
                (0..body.len())
                    // SAFETY: `i` is within `body`, a live slice.
                    .map(|i| unsafe { std::ptr::read_volatile(body.as_ptr().add(i)) })
                    .collect()
            };
            let before = read(body);
            let (open, cv) = &*self.gate;
            // Opened by the test; bounded, so a failing test still lets the server stop.
            let _ = cv
                .wait_timeout_while(open.lock().unwrap(), Duration::from_secs(30), |open| !*open)
                .unwrap();
            *self.intact.lock().unwrap() = Some(read(body) == before);
        }
        Handler::<M, W>::handle_inline(&self.demo, opcode, request, body, reply)
    }
    fn serves_inline(&self) -> bool {
        true
    }
    fn services(&self) -> Vec<(&'static str, u64)> {
        Handler::<M, W>::services(&self.demo)
    }
}

/// ATTACK: a client that gives up mid-call (its deadline passes) while the handler still reads
/// the call's body where it lies, in the port's bulk area; meanwhile another client keeps
/// trying to claim exactly that port (a handle whose searches start there) and writes its own
/// bodies into the bulk areas of the ports it gets, over many of the monitor's intervals.
/// MUST HOLD: the given-up port stays abandoned, claimed by nobody, until the handler has
/// answered (the monitor frees a port only once its line is at rest), so the body the handler
/// reads stays the one it was given; then the port is taken back, and serves again.
#[test]
fn a_port_given_up_mid_call_stays_out_of_reach_while_its_handler_reads_the_body() {
    let _w = Watchdog::new("given up mid-call", Duration::from_secs(120));
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let intact = Arc::new(Mutex::new(None));
    let config = ServerConfig {
        ports: 32,
        workers: 2,
        bulk: BULK,
        reclaim_interval: Duration::from_millis(5),
        ..ServerConfig::default()
    };
    let handler = GatedSum {
        gate: Arc::clone(&gate),
        intact: Arc::clone(&intact),
        demo: Demo::server(DemoService),
    };
    let server = ShmServer::start(unique("given-up"), config, handler).unwrap();
    let config = ClientConfig::default().service::<Demo>();
    let quitter = ShmClient::attach(server.path(), config.clone().deadline(SHORT)).unwrap();
    let body = vec![0xe7u8; 2000];
    assert_eq!(
        Demo::client(&quitter).sum(&body),
        Err(Error::Transport(Transport::Deadline))
    );
    let port = quitter.last_port();
    assert_eq!(server.port_owner(port).0, ABANDONED);
    let other = ShmClient::attach(server.path(), config.deadline(DEADLINE)).unwrap();
    let until = Instant::now() + Duration::from_millis(200);
    let mut calls = 0u64;
    while Instant::now() < until || calls < 20 {
        // A handle whose search starts at the given-up port: it gets that port if it is free.
        let c = other.handle(port);
        let mine = vec![0x11u8; 2000];
        assert_eq!(
            Demo::client(&c).sum(&mine),
            Ok(Summed {
                len: 2000,
                sum: 0x11 * 2000
            })
        );
        assert_ne!(
            c.last_port(),
            port,
            "the given-up port was claimed mid-call"
        );
        assert_eq!(server.port_owner(port).0, ABANDONED, "freed mid-call");
        calls += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        *intact.lock().unwrap(),
        None,
        "the gated handler returned early"
    );
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    let until = Instant::now() + DEADLINE;
    while server.port_owner(port).0 != 0 {
        assert!(
            Instant::now() < until,
            "the given-up port was never taken back"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        *intact.lock().unwrap(),
        Some(true),
        "the body changed under its handler"
    );
    // The port serves again.
    let c = other.handle(port);
    assert_eq!(Demo::client(&c).echo(3), Ok(echoed_from(&echo_bytes(3))));
    assert_eq!(c.last_port(), port);
    drop((c, other, quitter));
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!(stats.reclaimed, 1);
    assert_eq!(stats.panicked, 0);
}

/// The demo service, its inline echoes answered later by a task of its own (a thread here) that
/// sends status NOT_INLINE (6: a code ferry-rpc does not define, which this transport reserves),
/// counting the runs of the echo's handler inline and through the packets.
struct AnswersSix {
    demo: Serving<Demo, DemoService>,
    inline_runs: Arc<AtomicU64>,
    packet_runs: Arc<AtomicU64>,
}

impl<M: Mailbox, W: Wait> Handler<M, W> for AnswersSix {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        if port.opcode() == Demo::OPCODE_ECHO {
            self.packet_runs.fetch_add(1, Ordering::SeqCst);
        }
        self.demo.handle(port)
    }
    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        Handler::<M, W>::handle_inline(&self.demo, opcode, request, body, reply)
    }
    fn handle_inline_later(
        &self,
        opcode: u32,
        _request: &[u8],
        _body: &[u8],
        later: Box<dyn Later>,
    ) -> Result<(), Box<dyn Later>> {
        if opcode != Demo::OPCODE_ECHO {
            return Err(later);
        }
        self.inline_runs.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || later.send(status::NOT_INLINE, &[]));
        Ok(())
    }
    fn answers_later(&self) -> bool {
        true
    }
    fn serves_inline(&self) -> bool {
        true
    }
    fn services(&self) -> Vec<(&'static str, u64)> {
        Handler::<M, W>::services(&self.demo)
    }
}

/// ATTACK: a handler whose task answers an inline call later with status NOT_INLINE (6), the
/// code by which this transport tells a client "nothing ran here, use the packets" (a hand-written
/// handler's own error code 6, say: ferry-rpc defines none above 5).
/// MUST HOLD: as for a handler that returns it at once (`ShmServer`'s docs: counted failed and
/// answered SERVER_ERROR), the call's handler runs once: the client is never told to make again,
/// through the packets, a call that already ran.
#[test]
fn a_later_answer_of_not_inline_does_not_run_the_call_twice() {
    let _w = Watchdog::new("later not-inline", Duration::from_secs(120));
    let inline_runs = Arc::new(AtomicU64::new(0));
    let packet_runs = Arc::new(AtomicU64::new(0));
    let handler = AnswersSix {
        demo: Demo::server(DemoService),
        inline_runs: Arc::clone(&inline_runs),
        packet_runs: Arc::clone(&packet_runs),
    };
    let server = ShmServer::start(unique("later-six"), ServerConfig::default(), handler).unwrap();
    let shm = ShmClient::attach(
        server.path(),
        ClientConfig::default().service::<Demo>().deadline(DEADLINE),
    )
    .unwrap();
    let got = Demo::client(&shm).echo(11);
    let runs = (
        inline_runs.load(Ordering::SeqCst),
        packet_runs.load(Ordering::SeqCst),
    );
    assert_eq!(
        runs,
        (1, 0),
        "the echo's handler ran inline and again through the packets (the client got {got:?})"
    );
    assert_eq!(got, Err(Error::Status(Status::ServerError)));
    // Counted as a handler's NOT_INLINE answered at once is: failed.
    assert_eq!(server.stats().failed, 1, "{:?}", server.stats());
    drop(shm);
    server.shutdown(DEADLINE);
}

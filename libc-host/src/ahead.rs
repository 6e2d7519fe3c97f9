//! Reads at offsets that the lanes of one message make of one file, served together.
//!
//! A warp's lanes reading a file at offsets usually read neighbouring ranges (lane `i` its slice
//! `i`): thirty-two `pread`s of a kilobyte each, where one of thirty-two kilobytes costs about as
//! much as one of them. While a serving thread serves a message whole
//! ([`super::batch_per_message`]), the data of its last read of a shared descriptor is kept, so a
//! lane asking for bytes it holds is answered from it; and once two lanes in a row read forward by
//! at most what they read (a run of neighbouring ranges), the next read takes in one `pread` what
//! the message's lanes left would read if the run goes on. The lanes of a message are served at
//! one moment, so what each gets is what its own `pread` would have got then.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::files::ShareKey;
use ferry_libc::IO_LIMIT;

/// The lanes of a message (a warp's 32): a run read ahead covers at most the lanes left of them.
const LANES: u64 = 32;

/// Bytes read at an offset: read for the lane, or a part of what a read for several lanes got.
pub(super) enum Data {
    Own(Vec<u8>),
    Part(Arc<Vec<u8>>, Range<usize>),
}

impl AsRef<[u8]> for Data {
    fn as_ref(&self) -> &[u8] {
        match self {
            Data::Own(data) => data,
            Data::Part(data, range) => &data[range.clone()],
        }
    }
}

/// Reads `buf.len()` bytes of `file` at `offset`, or fewer at its end: how many.
pub(super) fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset.saturating_add(got as u64)) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The last read of a message of a shared descriptor.
struct Ahead {
    /// The descriptor: its shard and share.
    of: (usize, ShareKey),
    /// The range asked of the file; `data` holds its first bytes (all but past the file's end).
    asked: Range<u64>,
    data: Arc<Vec<u8>>,
    /// The offset the last lane asked for, and how many lanes of the message read here.
    last: u64,
    lanes: u64,
}

std::thread_local! {
    static AHEAD: RefCell<Option<Ahead>> = const { RefCell::new(None) };
    /// A buffer to read into, kept from message to message.
    static SPARE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `len` bytes (at most [`IO_LIMIT`]) of the shared descriptor `of`, `file`, at `offset`, for a
/// lane of the message the calling thread serves.
pub(super) fn read_in_message(
    of: (usize, ShareKey),
    file: &File,
    offset: u64,
    len: usize,
) -> io::Result<Data> {
    let len = len.min(IO_LIMIT) as u64;
    let end = offset.saturating_add(len);
    let kept = AHEAD.with(|a| {
        let mut a = a.borrow_mut();
        let ahead = a.as_mut().filter(|a| a.of == of)?;
        let lanes = ahead.lanes;
        let last = ahead.last;
        ahead.last = offset;
        ahead.lanes += 1;
        if offset < ahead.asked.start || end > ahead.asked.end {
            return Some(Err((lanes, last)));
        }
        let held = ahead.data.len();
        let from = ((offset - ahead.asked.start) as usize).min(held);
        let to = ((end - ahead.asked.start) as usize).min(held);
        Some(Ok(Data::Part(Arc::clone(&ahead.data), from..to)))
    });
    let (lanes, last) = match kept {
        Some(Ok(data)) => return Ok(data),
        Some(Err(seen)) => seen,
        None => (0, offset),
    };
    // A run: this lane reads forward of the last by at most what it reads. Read what the lanes
    // left would read if it goes on.
    let stride = offset.wrapping_sub(last);
    let span = match lanes > 0 && offset > last && stride <= len {
        true => len + stride * LANES.saturating_sub(lanes + 1),
        false => len,
    };
    let span = span.min(IO_LIMIT as u64).max(len);
    // A run's read goes into the buffer kept from message to message (a lane's own, a buffer of
    // its own: the lanes before the run still hold theirs until the message is answered).
    let mut buf = match span > len {
        true => SPARE.with(|s| std::mem::take(&mut *s.borrow_mut())),
        false => Vec::new(),
    };
    buf.clear();
    buf.resize(span as usize, 0);
    let got = read_full(file, &mut buf, offset)?;
    buf.truncate(got);
    let data = Arc::new(buf);
    let old = AHEAD.with(|a| {
        a.borrow_mut().replace(Ahead {
            of,
            asked: offset..offset.saturating_add(span),
            data: Arc::clone(&data),
            last: offset,
            lanes: lanes + 1,
        })
    });
    keep_spare(old);
    let to = (len as usize).min(got);
    Ok(Data::Part(data, 0..to))
}

/// Keeps the buffer of `old` for the next read if nobody holds it.
fn keep_spare(old: Option<Ahead>) {
    if let Some(buf) = old.and_then(|old| Arc::try_unwrap(old.data).ok()) {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            if buf.capacity() > s.capacity() {
                *s = buf;
            }
        });
    }
}

/// Forgets the message's last read (its buffer kept for the next message).
pub(super) fn end_message() {
    keep_spare(AHEAD.with(|a| a.borrow_mut().take()));
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::TempFile;

    fn file_of(n: usize) -> (TempFile, Vec<u8>) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
        (TempFile::new(&format!("ahead-{n}"), &data), data)
    }

    const OF: (usize, ShareKey) = (
        0,
        ShareKey {
            owner: 1,
            dev: 2,
            ino: 3,
        },
    );

    /// Every lane of a message gets what its own `pread` gets, whatever the lanes ask.
    #[test]
    fn every_lane_gets_what_its_own_read_would() {
        let (t, data) = file_of(100_000);
        let file = File::open(&t.0).unwrap();
        let patterns: Vec<Vec<(u64, usize)>> = vec![
            // Neighbouring slices, the last ones past the end.
            (0..32).map(|i| (i * 3125, 3125)).collect(),
            (0..32).map(|i| (90_000 + i * 700, 700)).collect(),
            // Overlapping, repeated, backwards, far apart, empty.
            (0..32).map(|i| (i * 100, 400)).collect(),
            (0..32).map(|_| (5, 64)).collect(),
            (0..32).rev().map(|i| (i * 1000, 1000)).collect(),
            (0..32).map(|i| (i * 50_000 % 100_003, 10)).collect(),
            (0..32).map(|i| (i * 16, 0)).collect(),
            vec![
                (0, 10),
                (10, 10),
                (u64::MAX - 5, 10),
                (20, 10),
                (u64::MAX, 1),
            ],
        ];
        for lanes in patterns {
            for (offset, len) in lanes.iter().copied() {
                let got = read_in_message(OF, &file, offset, len).map(|d| d.as_ref().to_vec());
                let mut own = vec![0; len];
                let alone = read_full(&file, &mut own, offset).map(|n| own[..n].to_vec());
                match (got, alone) {
                    (Ok(got), Ok(alone)) => assert_eq!(got, alone, "{offset} + {len}"),
                    (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
                    (got, alone) => panic!("{offset} + {len}: {got:?} against {alone:?}"),
                }
                if offset < data.len() as u64 && len > 0 {
                    assert_eq!(got_first(&file, offset), data[offset as usize]);
                }
            }
            end_message();
        }
    }

    fn got_first(file: &File, offset: u64) -> u8 {
        let mut b = [0];
        read_full(file, &mut b, offset).unwrap();
        b[0]
    }

    /// A run of neighbouring reads takes two `pread`s, the second for every lane left.
    #[test]
    fn a_run_is_read_once_for_the_lanes_left() {
        let (t, _) = file_of(64 * 1024);
        let file = File::open(&t.0).unwrap();
        read_in_message(OF, &file, 0, 1000).unwrap();
        read_in_message(OF, &file, 1000, 1000).unwrap();
        let asked = AHEAD.with(|a| a.borrow().as_ref().unwrap().asked.clone());
        assert_eq!(asked, 1000..32_000, "lanes 1 to 31");
        // The other descriptor is read apart, and the run starts anew there.
        let other = (1, OF.1);
        read_in_message(other, &file, 0, 10).unwrap();
        let asked = AHEAD.with(|a| a.borrow().as_ref().unwrap().asked.clone());
        assert_eq!(asked, 0..10);
        end_message();
        assert!(AHEAD.with(|a| a.borrow().is_none()));
    }
}

// Types of one's own with `#[wire]` and nothing else ferry needs (no zerocopy import, no
// `#[repr]`, no `Schema`): a struct and an enum as a call's arguments and replies, an enum as its
// error, served between two threads.

use std::time::Duration;

use ferry_rpc::service::Error;
use ferry_rpc::{wire, HeapRegion, RpcOpcodes};
use ferry_testkit::Watchdog;

/// A struct: `repr(C)` is added. Neither `Clone` nor `Copy`: a call takes its arguments by value.
#[wire]
#[derive(Debug, PartialEq)]
pub struct Move {
    by: i64,
    times: u32,
    turn: Turn,
}

/// A fieldless enum: `repr(u32)` is added (bytes 1 and 2 are its only values).
#[wire]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    Left = 1,
    Right = 2,
}

/// An error, with its own one-byte `repr`, written through the full path.
#[ferry_rpc::wire]
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Overflow = 7,
}

/// A tuple struct, its derives written before the attribute. Its fields leave no padding (a
/// struct's bytes are all its value).
#[derive(Clone, Copy, Debug, PartialEq)]
#[wire]
pub struct Place(i64, Turn, u32);

#[derive(RpcOpcodes)]
pub enum Walker {
    /// Applies a move to a place: the struct and both enums as argument, reply and error.
    #[rpc(response = Place, error = Refusal)]
    Step { from: Place, m: Move },
    /// The turn after `t`.
    #[rpc(response = Turn)]
    Next { t: Turn },
}

struct Walk;

impl WalkerServer for Walk {
    fn step(&self, from: Place, m: Move) -> Result<Place, Refusal> {
        let by = m.by.checked_mul(m.times as i64).ok_or(Refusal::Overflow)?;
        let at = from.0.checked_add(by).ok_or(Refusal::Overflow)?;
        Ok(Place(at, m.turn, from.2 + 1))
    }
    fn next(&self, t: Turn) -> Turn {
        match t {
            Turn::Left => Turn::Right,
            Turn::Right => Turn::Left,
        }
    }
}

fn main() {
    let _watchdog = Watchdog::new("the #[wire] pass case", Duration::from_secs(60));
    assert_eq!(core::mem::size_of::<Turn>(), 4);
    assert_eq!(core::mem::size_of::<Refusal>(), 1);
    assert_ne!(Walker::FINGERPRINT, 0);
    let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (server, mut buffers) = (region.server(), Vec::new());
            for _ in 0..3 {
                while Walker::serve_one(&Walk, &server, &mut buffers)
                    .unwrap()
                    .is_none()
                {
                    std::thread::yield_now();
                }
            }
        });
        let site = region.client();
        let c = Walker::client(&site);
        let m = Move {
            by: 3,
            times: 2,
            turn: Turn::Right,
        };
        assert_eq!(
            c.step(Place(1, Turn::Left, 0), m),
            Ok(Place(7, Turn::Right, 1))
        );
        let far = Move {
            by: i64::MAX,
            times: 2,
            turn: Turn::Left,
        };
        assert_eq!(
            c.step(Place(0, Turn::Left, 0), far),
            Err(Error::App(Refusal::Overflow))
        );
        assert_eq!(c.next(Turn::Left), Ok(Turn::Right));
    });
}

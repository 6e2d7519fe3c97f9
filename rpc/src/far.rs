//! Copies between a device's own memory and memory across the bus (a region in mapped host
//! memory), for device code.
//!
//! A copy of bytes whose alignment the compiler cannot see is lowered, on NVPTX, to a loop of
//! one-byte loads and stores; across the bus every one of them is a transaction of its own. These
//! copies move the far side a naturally aligned 16-byte unit at a time (one vector load or
//! store each, several issued together) and only the near side (a lane's stack, device memory)
//! a byte at a time. On the host they are `copy_from_slice`.

/// Copies `src` (across the bus: read a word at a time) into `dst`, which must be as long.
#[inline]
pub fn copy_from_far(dst: &mut [u8], src: &[u8]) {
    if cfg!(any(target_arch = "nvptx64", target_arch = "amdgpu")) {
        words_from(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Copies `src` into `dst` (across the bus: written a word at a time), which must be as long.
#[inline]
pub fn copy_to_far(dst: &mut [u8], src: &[u8]) {
    if cfg!(any(target_arch = "nvptx64", target_arch = "amdgpu")) {
        words_to(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// The far side's unit: 16 bytes (a vector load or store of two words on NVPTX), aligned.
const WORD: usize = core::mem::size_of::<u128>();

/// Words moved per turn of the copies' loops: their loads (or stores) are issued together, so a
/// lane has this many in flight across the bus rather than one.
const BATCH: usize = 8;

/// `dst.copy_from_slice(src)` with every load of `src` but the unaligned ends a whole word, a
/// batch of loads at a time.
// Not inlined on a GPU: a program's copies share one body (its loops are long).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn words_from(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_from_far: lengths differ");
    let n = src.len();
    // `align_offset` may say it cannot (usize::MAX): then every byte is an end.
    let head = src.as_ptr().align_offset(WORD).min(n);
    let words = (n - head) / WORD;
    let (dst_head, rest) = dst.split_at_mut(head);
    dst_head.copy_from_slice(&src[..head]);
    let (dst_body, dst_tail) = rest.split_at_mut(words * WORD);
    let body = src[head..].as_ptr().cast::<u128>();
    let mut batches = dst_body.chunks_exact_mut(WORD * BATCH);
    let mut at = 0;
    for out in batches.by_ref() {
        let mut w = [0u128; BATCH];
        for (k, v) in w.iter_mut().enumerate() {
            // SAFETY: `body` is `src`'s first word-aligned byte (`align_offset`), and word
            // `at + k < words` lies inside `src`, which is borrowed for the call; any bits are a
            // `u128`.
            *v = unsafe { body.add(at + k).read() };
        }
        for (o, v) in out.chunks_exact_mut(WORD).zip(w) {
            o.copy_from_slice(&v.to_ne_bytes());
        }
        at += BATCH;
    }
    for out in batches.into_remainder().chunks_exact_mut(WORD) {
        // SAFETY: as above, for the words after the last whole batch.
        let v = unsafe { body.add(at).read() };
        out.copy_from_slice(&v.to_ne_bytes());
        at += 1;
    }
    dst_tail.copy_from_slice(&src[head + words * WORD..]);
}

/// `dst.copy_from_slice(src)` with every store to `dst` but the unaligned ends a whole word.
// Not inlined on a GPU: a program's copies share one body (its loops are long).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn words_to(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_to_far: lengths differ");
    let n = dst.len();
    let head = dst.as_ptr().align_offset(WORD).min(n);
    let words = (n - head) / WORD;
    let (dst_head, rest) = dst.split_at_mut(head);
    dst_head.copy_from_slice(&src[..head]);
    let (dst_body, dst_tail) = rest.split_at_mut(words * WORD);
    let body = dst_body.as_mut_ptr().cast::<u128>();
    for (i, part) in src[head..head + words * WORD]
        .chunks_exact(WORD)
        .enumerate()
    {
        let mut w = [0u8; WORD];
        w.copy_from_slice(part);
        // SAFETY: `body` is `dst`'s first word-aligned byte, and word `i < words` lies inside
        // `dst`, borrowed mutably for the call.
        unsafe { body.add(i).write(u128::from_ne_bytes(w)) };
    }
    dst_tail.copy_from_slice(&src[head + words * WORD..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_copies_equal_a_byte_copy_at_every_alignment_and_length() {
        let data: [u8; 400] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for from in 0..9 {
            for to in 0..9 {
                for len in [
                    0, 1, 7, 8, 9, 15, 16, 17, 40, 63, 64, 65, 80, 128, 129, 255, 383,
                ] {
                    let src = &data[from..from + len];
                    let mut a = [0u8; 400];
                    words_from(&mut a[to..to + len], src);
                    let mut b = [0u8; 400];
                    words_to(&mut b[to..to + len], src);
                    let mut want = [0u8; 400];
                    want[to..to + len].copy_from_slice(src);
                    assert_eq!(a, want, "from {from} to {to} len {len}");
                    assert_eq!(b, want, "from {from} to {to} len {len}");
                }
            }
        }
    }
}

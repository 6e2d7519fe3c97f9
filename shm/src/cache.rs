//! Cache placement hints.

/// Hints the processor to move the cache line holding `at` out of this core's private caches
/// into the shared last-level cache: x86-64's `cldemote`, which processors without it (Intel's
/// before it, AMD's) execute as a NOP; nothing on other architectures.
///
/// For a line that another core reads next: it then finds the line in the shared cache rather
/// than taking it from this core. An inline-call worker demotes each line it answers
/// (`inline`); `ferry bench` does the same in its ping-pong with work, for a like comparison.
#[inline(always)]
pub fn demote<T>(at: &T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `cldemote` is a hint with no architectural effect: it changes no memory, register
    // or flag (it reads only its address register), and processors without it execute it as a
    // NOP (its encoding, NP 0F 1C /0, is in the hint-NOP space on Intel and AMD; only a LOCK
    // prefix, which this has not, makes it fault). `at` is a live reference, so the address is
    // mapped.
    unsafe {
        std::arch::asm!(
            "cldemote [{at}]",
            at = in(reg) at as *const T,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = at;
}

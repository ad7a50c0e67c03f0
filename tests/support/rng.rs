//! Deterministic random sources: a test is reproducible without a seed file, and a failure names its seed.
//!
//! Three generators, because each suite's inputs were fixed with one of them and switching a suite to another would
//! change what it tries: [`XorShift`] (random policies, mutated requests, garbage inputs), [`SplitMix`] (the
//! narrowing properties, the digest tests) and [`Lcg`] (shuffled examples). They differ only in `next`; the helpers
//! (`below`, `chance`, `pick`, `word`, `permutation`) are the same for all three.

/// xorshift64 (Marsaglia 13/7/17).
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// SplitMix64.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A PCG-style LCG step; the output is the state's high bits.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// The helpers every generator has, written once over its `next`.
macro_rules! helpers {
    ($($generator:ident),*) => {$(
        impl $generator {
            /// A number in `0..n` (0 when `n` is 0).
            pub fn below(&mut self, n: usize) -> usize {
                (self.next() % n.max(1) as u64) as usize
            }

            /// True `percent` times in 100.
            pub fn chance(&mut self, percent: u64) -> bool {
                self.next() % 100 < percent
            }

            pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
                &items[self.below(items.len())]
            }

            pub fn word(&mut self, items: &[&'static str]) -> &'static str {
                *self.pick(items)
            }

            /// A random order of `0..n` (Fisher-Yates).
            pub fn permutation(&mut self, n: usize) -> Vec<usize> {
                let mut order: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    let j = self.below(i + 1);
                    order.swap(i, j);
                }
                order
            }
        }
    )*};
}

helpers!(XorShift, SplitMix, Lcg);

//! A set of byte ranges `[start, end)` kept merged: what a transaction has received, and what
//! it still has to ask for. The non-contiguous window is two of these.
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges {
    m: BTreeMap<u32, u32>,
}

impl Ranges {
    pub fn new() -> Ranges {
        Ranges::default()
    }

    pub fn is_empty(&self) -> bool {
        self.m.is_empty()
    }

    pub fn first(&self) -> Option<(u32, u32)> {
        self.m.iter().next().map(|(&s, &e)| (s, e))
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.m.iter().map(|(&s, &e)| (s, e))
    }

    pub fn insert(&mut self, mut s: u32, mut e: u32) {
        if s >= e {
            return;
        }
        // merge with a range starting before s that reaches s
        if let Some((&ps, &pe)) = self.m.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.m.remove(&ps);
            }
        }
        // swallow ranges starting inside [s, e]
        while let Some((&ns, &ne)) = self.m.range(s..=e).next() {
            e = e.max(ne);
            self.m.remove(&ns);
        }
        self.m.insert(s, e);
    }

    pub fn remove(&mut self, s: u32, e: u32) {
        if s >= e {
            return;
        }
        let hit: Vec<(u32, u32)> = self
            .m
            .range(..e)
            .rev()
            .take_while(|&(_, &re)| re > s)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in hit {
            self.m.remove(&rs);
            if rs < s {
                self.m.insert(rs, s);
            }
            if re > e {
                self.m.insert(e, re);
            }
        }
    }

    /// How many bytes of `[s, e)` the set holds.
    pub fn covered(&self, s: u32, e: u32) -> u32 {
        let mut n = 0;
        if s >= e {
            return 0;
        }
        for (&a, &b) in self.m.range(..e).rev() {
            if b <= s {
                break;
            }
            n += b.min(e) - a.max(s);
        }
        n
    }

    /// Whether every byte of `[s, e)` is in the set.
    pub fn covers(&self, s: u32, e: u32) -> bool {
        s >= e || self.m.range(..=s).next_back().is_some_and(|(_, &re)| re >= e)
    }

    /// Drops everything at or beyond `end`.
    pub fn truncate(&mut self, end: u32) {
        self.remove(end, u32::MAX);
    }

    /// End of the range starting at 0, or 0: the contiguous prefix.
    pub fn prefix(&self) -> u32 {
        match self.m.get(&0) {
            Some(&e) => e,
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn behaves_like_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u32..200, 0u32..60), 0..40)) {
            let (mut r, mut bits) = (Ranges::new(), [false; 260]);
            for (add, s, n) in ops {
                if add { r.insert(s, s + n) } else { r.remove(s, s + n) }
                for b in &mut bits[s as usize..(s + n) as usize] { *b = add }
            }
            for i in 0..259u32 {
                prop_assert_eq!(r.covers(i, i + 1), bits[i as usize], "byte {}", i);
            }
            // merged: no two ranges touch
            let v: Vec<_> = r.iter().collect();
            for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
            let p = bits.iter().take_while(|b| **b).count() as u32;
            prop_assert_eq!(r.prefix(), p);
            for (s, e) in [(0u32, 259u32), (17, 90), (100, 101), (60, 60), (250, 255)] {
                let want = bits[s as usize..e as usize].iter().filter(|b| **b).count() as u32;
                prop_assert_eq!(r.covered(s, e), want, "[{}, {})", s, e);
            }
        }
    }
}

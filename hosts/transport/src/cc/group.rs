//! Receiver-set rates (UDT/CCC §4.1.5 and §4 end): the receiver, or a central manager for a
//! group of flows into one receiver (GTP-like, "CGTP"), decides each sender's rate and sends it
//! as a custom control message (sendCustomMsg); the sender's algorithm applies it in
//! processCustomMsg. The streaming merge the paper names is the one-flow case. `Blaster`
//! (CUDPBlast) takes these messages; the manager is sans-IO: it is told what each flow asks
//! for and returns the shares.

/// Tag of a rate request: b"RATE" then the rate in bit/s, u64 big-endian.
pub const RATE_TAG: [u8; 4] = *b"RATE";

pub fn rate_msg(bps: u64) -> Vec<u8> {
    let mut m = RATE_TAG.to_vec();
    m.extend_from_slice(&bps.to_be_bytes());
    m
}

/// The rate a message asks for; None for anything else (other algorithms' messages).
pub fn parse_rate(msg: &[u8]) -> Option<u64> {
    if msg.len() != 12 || msg[..4] != RATE_TAG {
        return None;
    }
    let bps = u64::from_be_bytes(msg[4..].try_into().ok()?);
    (bps > 0).then_some(bps)
}

/// Central manager of a group of flows sharing the receiver's `capacity_bps`: max-min fair
/// shares of the capacity given each flow's demand (a flow asking less than an equal share
/// keeps what it asks, the rest is split among the others).
#[derive(Clone, Debug)]
pub struct Group {
    pub capacity_bps: f64,
    demands: Vec<(u32, f64)>,
}

impl Group {
    pub fn new(capacity_bps: f64) -> Group {
        Group { capacity_bps, demands: Vec::new() }
    }

    /// A flow joins or changes its demand (bit/s; f64::INFINITY for "as much as it can").
    pub fn demand(&mut self, flow: u32, bps: f64) {
        match self.demands.iter_mut().find(|(f, _)| *f == flow) {
            Some(d) => d.1 = bps,
            None => self.demands.push((flow, bps)),
        }
    }

    pub fn leave(&mut self, flow: u32) {
        self.demands.retain(|(f, _)| *f != flow);
    }

    /// Each flow's share, in join order.
    pub fn shares(&self) -> Vec<(u32, f64)> {
        let mut left = self.capacity_bps;
        let mut open: Vec<usize> = (0..self.demands.len()).collect();
        let mut share = vec![0.0; self.demands.len()];
        while !open.is_empty() {
            let fair = left / open.len() as f64;
            let (small, big): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| self.demands[i].1 <= fair);
            if small.is_empty() {
                for &i in &big {
                    share[i] = fair;
                }
                break;
            }
            for &i in &small {
                share[i] = self.demands[i].1;
                left -= self.demands[i].1;
            }
            open = big;
        }
        self.demands.iter().zip(share).map(|((f, _), s)| (*f, s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_messages_round_trip_and_foreign_ones_are_ignored() {
        assert_eq!(parse_rate(&rate_msg(12_345_678)), Some(12_345_678));
        assert_eq!(parse_rate(b"RATE"), None);
        assert_eq!(parse_rate(&rate_msg(0)), None);
        let mut m = rate_msg(5);
        m[0] = b'X';
        assert_eq!(parse_rate(&m), None);
    }

    #[test]
    fn shares_are_max_min_fair() {
        let mut g = Group::new(100e6);
        g.demand(1, f64::INFINITY);
        g.demand(2, 10e6);
        g.demand(3, f64::INFINITY);
        let s = g.shares();
        assert_eq!(s, vec![(1, 45e6), (2, 10e6), (3, 45e6)]);
        g.leave(2);
        assert_eq!(g.shares(), vec![(1, 50e6), (3, 50e6)]);
        g.demand(1, 20e6);
        assert_eq!(g.shares(), vec![(1, 20e6), (3, 80e6)]);
        let total: f64 = g.shares().iter().map(|s| s.1).sum();
        assert!(total <= g.capacity_bps + 1e-6);
    }
}

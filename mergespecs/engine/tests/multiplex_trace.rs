//! The share of ACKs combined on a bursty trace (tests/bursty): with parallel bundles it
//! grows with MaxLocalDelay, as in the paper's Table 1 (77 % at 1 ms to 99 % at 50 ms);
//! with the old close-on-a-repeat rule it stayed flat near 50 %. `cargo bench -p
//! concast-engine --bench multiplex` prints the same figure for any module.

mod bursty;

use concast_engine::SpecRef;
use concast_spec_multiplex::Multiplex;

#[test]
fn combined_share_grows_with_the_local_delay_on_bursty_acks() {
    let acks = bursty::trace(16, 2_000_000);
    let mut shares = Vec::new();
    for ms in [1u32, 5, 10, 20, 50] {
        let c = bursty::run(|_| SpecRef::native::<Multiplex>(), &acks, ms * 1_000, ms * 2_000);
        println!(
            "MaxLocalDelay {ms:>2} ms: {:5.1} % of {} ACKs combined, {:.2} records per MplexPkt",
            c.percent(),
            c.acks,
            c.mean_bundle()
        );
        shares.push(c.percent());
    }
    assert!(
        shares.windows(2).all(|w| w[1] >= w[0] - 0.5),
        "more delay never combines clearly less: {shares:?}"
    );
    // Wide bounds: the trace is fixed, so these only fail if the rule changes.
    assert!(shares[0] > 60.0, "1 ms: {shares:?}");
    assert!(shares[4] > 95.0, "50 ms: {shares:?}");
}

#[test]
fn at_zero_delay_queue_access_combines_what_waits_for_the_busy_link() {
    // The paper's 0 ms row: without queue access every ACK leaves alone; with it, ACKs
    // arriving while the 10 Mbit/s output link is busy share a bundle.
    let acks = bursty::trace(16, 2_000_000);
    let run = |gate| {
        let link = bursty::Link::new(10_000_000);
        bursty::run_over(|_| SpecRef::native::<Multiplex>(), &acks, 0, 100_000, Some(link), gate)
    };
    let (without, with) = (run(false), run(true));
    println!("0 ms: {:.1} % combined without queue access, {:.1} % with", without.percent(), with.percent());
    assert_eq!(without.combined, 0, "zero delay, nothing pending in a one-datagram batch: alone");
    assert!(with.percent() > 20.0, "{:.1} %", with.percent());
}

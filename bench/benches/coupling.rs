//! Cost of one coupling call (issue 2): a passive FSE update and a TCP-CCC update must not grow
//! with the group (sums are kept incrementally); an active update touches every flow, so it is O(N).
//! `make bench` runs this and prints ns per call and the growth ratio against the smallest group
//! (bench/report_coupling.py).

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::tcp::{TcpCcc, TcpCoupler, TcpState, TcpUpdate};
use coupling::{Duration, FlowId, Instant};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn fse_group(algorithm: Algorithm, n: u64) -> FseGroup {
    let mut g = FseGroup::new(algorithm);
    for i in 0..n {
        g.register(FlowId(i), 0.5 + (i % 4) as f64 * 0.25, 1e6, Instant::ZERO)
            .unwrap();
    }
    g
}

/// Updates flows round-robin, each asking for a little more or a little less than it has.
fn bench_fse(c: &mut Criterion, name: &str, algorithm: Algorithm, sizes: &[u64]) {
    let mut group = c.benchmark_group(name);
    for &n in sizes {
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut g = fse_group(algorithm, n);
            let (mut i, mut t) = (0u64, 0u64);
            b.iter(|| {
                let f = FlowId(i % n);
                let cur = g.flow(f).unwrap().fse_rate_bps;
                let cc = if i % 3 == 0 { cur * 0.9 } else { cur + 1e4 };
                t += 1_000_000;
                let u = FseUpdate::new(cc, Instant::from_nanos(t)).rtt(Duration::from_millis(100));
                let out = g.update(f, u).unwrap();
                black_box(out.rate_bps);
                i += 1;
            });
        });
    }
    group.finish();
}

fn bench_ccc(c: &mut Criterion, sizes: &[u64]) {
    let mut group = c.benchmark_group("tcp_ccc_update");
    for &n in sizes {
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut g = TcpCcc::new(false);
            let mut told = Vec::with_capacity(n as usize);
            for i in 0..n {
                told.push(g.register(FlowId(i), 1.0, 10.0, 1e9).unwrap().cwnd_pkts);
            }
            let mut i = 0u64;
            b.iter(|| {
                let k = (i % n) as usize;
                // Mostly increases in CA; every 1000th call a loss (FR, then the halved exit).
                let u = match i % 1000 {
                    998 => TcpUpdate::new(told[k], told[k] / 2.0, TcpState::FastRecovery),
                    999 => {
                        TcpUpdate::new(told[k] / 2.0, told[k] / 2.0, TcpState::CongestionAvoidance)
                    }
                    _ => TcpUpdate::new(told[k] + 1.0, 20.0, TcpState::CongestionAvoidance),
                };
                if let Some(r) = g.update(FlowId(k as u64), u).unwrap() {
                    told[k] = r.cwnd_pkts;
                }
                black_box(g.sum_cwnd());
                if i % 1000 != 998 {
                    i += 1;
                } else {
                    i += 1;
                    // Same connection leaves FR on the next call.
                    let u =
                        TcpUpdate::new(told[k] / 2.0, told[k] / 2.0, TcpState::CongestionAvoidance);
                    if let Some(r) = g.update(FlowId(k as u64), u).unwrap() {
                        told[k] = r.cwnd_pkts;
                    }
                    i += 1;
                }
            });
        });
    }
    group.finish();
}

fn coupling(c: &mut Criterion) {
    let flat = [10, 100, 1_000, 10_000];
    bench_fse(c, "fse_passive_update", Algorithm::Passive, &flat);
    bench_fse(
        c,
        "fse_simple_passive_update",
        Algorithm::SimplePassive,
        &flat,
    );
    bench_ccc(c, &flat);
    bench_fse(c, "fse_active_update", Algorithm::Active, &[10, 100, 1_000]);
    bench_fse(
        c,
        "fse_conservative_active_update",
        Algorithm::ConservativeActive,
        &[10, 100, 1_000],
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = coupling
}
criterion_main!(benches);

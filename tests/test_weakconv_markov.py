"""Seed 001 section 2.3 (macroflow.weakconv.markov): the cwnd Markov chain of Reno with delayed ACKs
under random loss, checked against the paper's numbers first (Table 1's numeric row, sigma = 0.41 of
Eq. 12 over five decades, P_reno = 1.1e-4 and P_cubic = 3.4e-4 of section 3.1), then against the
balance equations (Eq. 9) written out here by hand, a tiny chain solved with exact fractions, and
bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from macroflow.weakconv import markov as mk

MBPS = 1e6


def _mbps1(x_bps: float) -> float:
    """Rounded as Table 1 prints: 0.1 Mbit/s."""
    return round(x_bps / MBPS, 1)


# --------------------------------------------------------------------------------------------------
# The paper's numbers


def test_section_3_1_drop_probabilities_follow_from_eq5_and_eq6_with_1500_byte_packets():
    # "P_reno = 1.1e-4, P_cubic = 3.4e-4" for 10 Mbit/s at RTT 100 ms (section 3.1).
    bits = 8.0 * 1500
    p_reno = mk.p_loss_for_rate_reno(10e6, bits, 0.1)
    p_cubic = mk.p_loss_for_rate_cubic(10e6, bits, 0.1)
    assert float(f"{p_reno:.1e}") == 1.1e-4
    assert float(f"{p_cubic:.1e}") == 3.4e-4
    # ...and not with Linux's 1448-byte MSS, with which Eq. 5 gives Table 1's numeric row's 1.0e-4.
    assert float(f"{mk.p_loss_for_rate_reno(10e6, 8.0 * 1448, 0.1):.1e}") == 1.0e-4 == mk.TABLE1_P_LOSS
    assert float(f"{mk.p_loss_for_rate_cubic(10e6, 8.0 * 1448, 0.1):.1e}") == 3.2e-4
    assert mk.TABLE1_MSS_BYTES == 1448 and mk.TABLE1_RTT_S == 0.1


def test_eq4_eq5_eq6_values_and_inverses():
    # Eq. 4 with a = 2: sqrt(3/4) / sqrt(P).
    assert mk.expected_cwnd_reno_pkts(1e-4) == pytest.approx(math.sqrt(0.75) * 100.0, rel=1e-15)
    assert mk.expected_cwnd_reno_pkts(1e-4, a=1.0) == pytest.approx(math.sqrt(1.5) * 100.0)
    # Eq. 5 = Eq. 1 of Eq. 4.
    assert mk.expected_rate_reno_bps(1e-4, 12000.0, 0.1) == pytest.approx(
        12000.0 * math.sqrt(0.75) * 100.0 / 0.1
    )
    # Eq. 6: 1.17 (RTT / P)^(3/4).
    assert mk.expected_cwnd_cubic_pkts(1e-4, 0.1) == pytest.approx(1.17 * 1000.0**0.75)
    for p in (1e-6, 3.3e-4, 2e-2):
        assert mk.p_loss_for_cwnd_reno(mk.expected_cwnd_reno_pkts(p)) == pytest.approx(p, rel=1e-12)
        assert mk.p_loss_for_rate_reno(
            mk.expected_rate_reno_bps(p, 11584.0, 0.03), 11584.0, 0.03
        ) == pytest.approx(p, rel=1e-12)
        assert mk.p_loss_for_cwnd_cubic(mk.expected_cwnd_cubic_pkts(p, 0.1), 0.1) == pytest.approx(
            p, rel=1e-12
        )
        assert mk.p_loss_for_rate_cubic(
            mk.expected_rate_cubic_bps(p, 12000.0, 0.01), 12000.0, 0.01
        ) == pytest.approx(p, rel=1e-12)
    # Eq. 1
    assert mk.rate_bps(100, 12000.0, 0.1) == 12e6
    assert np.allclose(mk.rate_bps(np.array([2, 4]), 8.0, 2.0), [8.0, 16.0])


def test_table1_numeric_row_as_printed():
    # Table 1, "Reno random drop (numeric)": 4.7, 10.0, 19.0, 10.7 Mbit/s, with 1448-byte segments
    # and P_loss = 1.0e-4 (the module docstring says why these inputs).
    row = mk.table1_numeric_row()
    assert set(row) == {"q05_bps", "q50_bps", "q95_bps", "mean_bps"}
    assert {k: _mbps1(v) for k, v in row.items()} == mk.TABLE1_PRINTED_ROW_MBPS == {
        "q05_bps": 4.7, "q50_bps": 10.0, "q95_bps": 19.0, "mean_bps": 10.7}
    assert row["q05_bps"] / MBPS == pytest.approx(4.749, abs=5e-4)  # 0.001 from the boundary


def test_the_candidate_of_section_3_1s_setup_misses_the_last_two_by_a_printed_unit_or_two():
    # 1500-byte packets, P from Eq. 5 for exactly 10 Mbit/s: 18.8 for 19.0, 10.6 for 10.7.
    row = mk.table1_numeric_row(mss_bytes=1500, p_loss=mk.p_loss_for_rate_reno(10e6, 12000.0, 0.1))
    assert row["q95_bps"] / MBPS == pytest.approx(18.84, abs=1e-9)
    assert row["mean_bps"] / MBPS == pytest.approx(10.6447, abs=1e-3)
    assert _mbps1(row["q05_bps"]) == 4.7 and _mbps1(row["q50_bps"]) == 10.0


def test_table1_candidates_as_in_the_docstring_and_none_prints_the_row():
    rows = mk.table1_candidates()
    assert len(rows) == 8
    assert not any(r["lower_matches_printed"] or r["interpolated_matches_printed"] for r in rows)
    by = {(r["mss_bytes"], r["p_loss_source"]): r for r in rows}
    # The Eq. 5 candidates all sit at exactly 10 Mbit/s by Eq. 5; the printed-P ones do not.
    for mss in mk.TABLE1_CANDIDATE_MSS_BYTES:
        assert by[(mss, "eq5")]["eq5_rate_bps"] == pytest.approx(10e6, rel=1e-12)
        assert by[(mss, "printed")]["p_loss"] == 1.1e-4
    # Cells of the docstring table (Mbit/s, 3 decimals).
    expect = {
        (1448, "printed"): ("lower", 4.518, 9.499, 18.071, 10.181),
        (1448, "eq5"): ("lower", 4.749, 9.962, 18.882, 10.646),
        (1460, "eq5"): ("lower", 4.672, 9.928, 18.922, 10.646),
        (1500, "printed"): ("lower", 4.680, 9.840, 18.720, 10.547),
        (1500, "eq5"): ("interpolated", 4.689, 9.977, 18.891, 10.645),
        (1514, "printed"): ("lower", 4.724, 9.932, 18.895, 10.645),
    }
    for key, (method, q05, q50, q95, mean) in expect.items():
        got = by[key][method]
        assert [round(got[k] / MBPS, 3) for k in ("q05_bps", "q50_bps", "q95_bps", "mean_bps")] == [
            q05, q50, q95, mean
        ], key


def test_the_95_percent_interval_runs_from_about_40_percent_to_more_than_double():
    # Section 2.3: "ranging roughly from less than 40% up to more than double the expected rate".
    d = mk.stationary_distribution(mk.TABLE1_P_LOSS)
    e4 = mk.expected_cwnd_reno_pkts(mk.TABLE1_P_LOSS)
    assert d.quantile_cwnd_pkts(0.025) / e4 < 0.41
    assert d.quantile_cwnd_pkts(0.975) / e4 > 2.0


def test_sigma_is_close_to_041_over_five_decades():
    # Tolerance: one unit of the printed last digit (0.01) where E[cwnd] >= 27 packets
    # (P_loss <= 1e-3); at 1e-2 E[cwnd] = 8.7 packets, the chain has a handful of states above the
    # floor of 2 and the discrete CDF bends the fit: 0.04 there.
    rows = mk.sigma_across_decades()
    assert [r.p_loss for r in rows] == [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]
    for r in rows:
        tol = 0.04 if r.p_loss > 1e-3 else 0.01
        assert abs(r.sigma_fit - mk.SIGMA_PAPER) <= tol, (r.p_loss, r.sigma_fit)
        assert r.tail_mass < 1e-12
        # Fig. 3's dashed lines: Eq. 12 with sigma = 0.41 stays near the chain's CDF.
        assert r.ks_at_041 <= (0.15 if r.p_loss > 1e-3 else 0.06), (r.p_loss, r.ks_at_041)
        # The plain standard deviation of ln(cwnd) is near too (0.42 for small P_loss).
        assert abs(r.std_ln_cwnd - 0.42) <= (0.08 if r.p_loss > 1e-3 else 0.025), r
    # "Fairly constant": the fits settle as P_loss falls.
    sig = [r.sigma_fit for r in rows]
    assert all(a > b for a, b in zip(sig, sig[1:]))
    assert max(sig[1:]) - min(sig[1:]) < 0.015


def test_eq12_lognormal_cdf():
    p = 1e-4
    e4 = mk.expected_cwnd_reno_pkts(p)
    assert mk.lognormal_cdf(e4, p) == pytest.approx(0.5, abs=1e-15)
    assert mk.lognormal_cdf(e4 * math.exp(0.41), p) == pytest.approx(0.8413447460685429, rel=1e-12)
    out = mk.lognormal_cdf(np.array([2.0, e4, 1e6]), p, sigma=0.3)
    assert out.shape == (3,) and out[0] < 1e-20 and out[2] == 1.0


def test_chain_mean_against_eq4():
    # Table 1's 10.7 Mbit/s mean vs E[b] = 10: the chain's mean is ~6.5 % above Eq. 4 at 1e-4.
    ratios = []
    for p in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        d = mk.stationary_distribution(p)
        ratios.append(d.mean_cwnd_pkts() / mk.expected_cwnd_reno_pkts(p))
    assert ratios[2] == pytest.approx(1.0647, abs=5e-4)
    assert all(1.0 < r < 1.075 for r in ratios)
    assert all(a < b for a, b in zip(ratios, ratios[1:]))  # approaching ~1.069 from below


def test_zero_mean_drift_identity():
    # Stationarity: increments (1/a per RTT, except at the cap) balance what losses take away.
    for p, a in ((1e-3, 2.0), (3e-2, 1.0), (1e-4, 2.0)):
        d = mk.stationary_distribution(p, a=a)
        s = d.states_pkts
        drop = np.where(s >= 3, s - np.maximum(2, s // 2), 0)
        up = (1.0 / a) * (1.0 - d.p_at_cap)
        down = float(np.sum(p * s * d.probabilities * drop))
        assert down == pytest.approx(up, rel=1e-10)
        # Hence E[cwnd^2] ~ 2 / (a P_loss) (exact for a continuous halving).
        assert d.mean_sq_cwnd_pkts2() * a * p / 2.0 == pytest.approx(1.0, abs=0.1)


# --------------------------------------------------------------------------------------------------
# The chain itself


def _eq9_sides(d: mk.CwndDistribution):
    """Eq. 9 written out for every state, with the boundary rules of section 2.3: (in, out)."""
    a, P, cap = d.a, d.p_loss, d.cap_pkts
    p = {int(s): float(v) for s, v in zip(d.states_pkts, d.probabilities)}

    def g(i: int) -> float:
        return p.get(i, 0.0)

    ins, outs = [], []
    for i in range(2, cap + 1):
        if i == 2:  # left only by increment; entered from 3, 4, 5 by halving
            lhs = 3 * P * g(3) + 4 * P * g(4) + 5 * P * g(5)
            rhs = (1.0 / a) * g(2)
        elif i == cap:  # left only by halving
            lhs = (1.0 / a) * g(i - 1) + 2 * i * P * g(2 * i) + (2 * i + 1) * P * g(2 * i + 1)
            rhs = P * i * g(i)
        else:
            lhs = (1.0 / a) * g(i - 1) + 2 * i * P * g(2 * i) + (2 * i + 1) * P * g(2 * i + 1)
            rhs = (P * i + 1.0 / a) * g(i)
        ins.append(lhs)
        outs.append(rhs)
    return np.array(ins), np.array(outs)


@pytest.mark.parametrize("method", ["cut", "dense"])
@pytest.mark.parametrize("p_loss,cap", [(1e-3, 200), (2e-2, 40), (0.3, 7), (1e-4, 900)])
def test_stationary_distribution_satisfies_eq9(method, p_loss, cap):
    d = mk.solve_stationary(cap, p_loss, method=method)
    assert d.method == method
    assert list(d.states_pkts) == list(range(2, cap + 1))
    assert d.probabilities.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.all(d.probabilities >= 0.0)
    ins, outs = _eq9_sides(d)
    # Every state against the largest flow (the linear solvers are accurate in absolute terms)...
    assert np.max(np.abs(ins - outs)) < 1e-13 * np.max(outs)
    if method == "cut":  # ...and state by state (the triangular solve is accurate relatively)
        big = outs > 1e-250
        assert np.max(np.abs(ins[big] - outs[big]) / outs[big]) < 1e-10


def test_solvers_agree():
    for p, cap in ((1e-3, 300), (5e-2, 30), (1e-4, 1200)):
        cut = mk.solve_stationary(cap, p, method="cut").probabilities
        dense = mk.solve_stationary(cap, p, method="dense").probabilities
        assert np.max(np.abs(cut - dense)) < 1e-13
    d_auto = mk.solve_stationary(100, 1e-3)
    assert d_auto.method in ("sparse", "cut")


def test_sparse_solver_agrees_with_the_cut_solver():
    sp = mk.solve_stationary(500, 1e-3, method="sparse")
    cut = mk.solve_stationary(500, 1e-3, method="cut")
    assert np.max(np.abs(sp.probabilities - cut.probabilities)) < 1e-13


def test_sparse_solver_without_scipy_says_so(monkeypatch: pytest.MonkeyPatch):
    # scipy is a dependency; an install without it gets a clear error, and "auto" the cut solver.
    monkeypatch.setattr(mk, "_scipy_available", lambda: False)
    with pytest.raises(ValueError, match="needs scipy"):
        mk.solve_stationary(50, 1e-2, method="sparse")
    assert mk.solve_stationary(50, 1e-2).method == "cut"


def test_tiny_chain_against_a_hand_solution():
    # cap = 5, a = 2, P = 1/10 (rates per RTT): 2->3 at 1/2; 3->4 at 1/2, 3->2 at 3/10;
    # 4->5 at 1/2, 4->2 at 4/10; 5->2 at 5/10. Balance of 3, 4, 5 (each entered only from below):
    #   p3 = (1/2) p2 / (1/2 + 3/10),  p4 = (1/2) p3 / (1/2 + 4/10),  p5 = (1/2) p4 / (5/10).
    half, P = Fraction(1, 2), Fraction(1, 10)
    p2 = Fraction(1)
    p3 = half * p2 / (half + 3 * P)
    p4 = half * p3 / (half + 4 * P)
    p5 = half * p4 / (5 * P)
    # state 2's own balance holds too: (1/2) p2 = 3P p3 + 4P p4 + 5P p5
    assert half * p2 == 3 * P * p3 + 4 * P * p4 + 5 * P * p5
    tot = p2 + p3 + p4 + p5
    exact = [float(x / tot) for x in (p2, p3, p4, p5)]
    assert exact[0] == pytest.approx(144 / 334, rel=1e-15)  # 1 : 5/8 : 25/72 : 25/72
    methods = ["cut", "dense"]
    try:
        import scipy.sparse  # noqa: F401

        methods.append("sparse")
    except ImportError:
        pass
    for m in methods:
        d = mk.solve_stationary(5, 0.1, a=2.0, method=m)
        assert np.allclose(d.probabilities, exact, rtol=1e-13, atol=0), m
    # The same by a dense numpy null space of the generator built here from the arcs.
    src, dst, rate = mk.transition_rates(5, 0.1)
    q = np.zeros((4, 4))
    for s, t, r in zip(src, dst, rate):
        q[s - 2, t - 2] += r
        q[s - 2, s - 2] -= r
    w, v = np.linalg.eig(q.T)
    pi = np.real(v[:, np.argmin(np.abs(w))])
    assert np.allclose(pi / pi.sum(), exact, rtol=1e-12)


def test_arcs_of_fig1_and_rtt_cancels():
    src, dst, rate = mk.transition_rates(9, 0.01, a=2.0, rtt_s=1.0)
    arcs = {(int(s), int(t)): float(r) for s, t, r in zip(src, dst, rate)}
    for i in range(2, 9):
        assert arcs[(i, i + 1)] == 0.5  # Eq. 7
    assert (9, 10) not in arcs  # the cap is left only by halving
    assert all(s != 2 or t == 3 for s, t in arcs)  # state 2 does not halve
    halving = {s: t for s, t in arcs if t < s}
    assert halving == {3: 2, 4: 2, 5: 2, 6: 3, 7: 3, 8: 4, 9: 4}  # Eq. 9: 2i, 2i+1 -> i
    assert arcs[(7, 3)] == pytest.approx(0.07)  # Eq. 8: P_loss i / RTT
    assert [mk.halving_target_pkts(i) for i in (3, 4, 5, 10, 11)] == [2, 2, 2, 5, 5]
    # Every rate scales with 1 / RTT, so the stationary distribution does not depend on RTT.
    _, _, rate_01 = mk.transition_rates(9, 0.01, a=2.0, rtt_s=0.1)
    assert np.allclose(rate_01, rate / 0.1)


def test_tail_mass_is_reported_and_below_tolerance():
    for p in (1e-1, 1e-3, 1e-5):
        d = mk.stationary_distribution(p)
        n = d.probabilities.size
        top = int(math.ceil(0.1 * n))
        assert d.tail_mass == pytest.approx(float(d.probabilities[-top:].sum()), rel=1e-12, abs=0)
        assert d.tail_mass < mk.TAIL_TOL == 1e-12
        assert d.p_at_cap <= d.tail_mass
        assert d.probabilities.sum() == pytest.approx(1.0, abs=1e-14)
        assert d.cap_pkts == d.states_pkts[-1] == d.caps_tried_pkts[-1]


def test_cap_growth():
    p = 1e-3  # E[cwnd] = 27 packets: a cap of 20 truncates a lot
    small = mk.solve_stationary(20, p)
    assert small.tail_mass > 1e-3
    d = mk.stationary_distribution(p, initial_cap=20)
    assert d.caps_tried_pkts[0] == 20 and len(d.caps_tried_pkts) > 3
    assert all(a < b for a, b in zip(d.caps_tried_pkts, d.caps_tried_pkts[1:]))
    assert d.tail_mass < 1e-12
    # ...and the caps before the last did not meet the tolerance.
    for c in d.caps_tried_pkts[:-1]:
        assert mk.solve_stationary(c, p).tail_mass >= 1e-12
    # Growing further changes nothing that matters.
    big = mk.solve_stationary(2 * d.cap_pkts, p)
    n = d.probabilities.size
    assert np.max(np.abs(big.probabilities[:n] - d.probabilities)) < 1e-12
    # A stricter tolerance grows further; an impossible one within max_cap is an error.
    assert mk.stationary_distribution(p, tol=1e-30).cap_pkts > d.cap_pkts
    with pytest.raises(ValueError, match="max_cap"):
        mk.stationary_distribution(p, initial_cap=20, max_cap=60)


def test_overflow_safe_for_a_needlessly_large_cap():
    p = 1e-2
    ref = mk.stationary_distribution(p)
    huge = mk.solve_stationary(3000, p, method="cut")  # p[cap] / p[mode] ~ exp(-1e4)
    assert np.all(np.isfinite(huge.probabilities))
    n = ref.probabilities.size
    assert np.max(np.abs(huge.probabilities[:n] - ref.probabilities)) < 1e-13


def test_quantile_definitions():
    d = mk.solve_stationary(5, 0.1)  # p = (144, 90, 50, 50) / 334
    cdf = np.array([144, 234, 284, 334]) / 334.0
    assert np.allclose(d.cdf, cdf, rtol=1e-13)
    # "lower": the smallest state with F >= q.
    assert d.quantile_cwnd_pkts(0.0) == 2.0
    assert d.quantile_cwnd_pkts(0.40) == 2.0
    assert d.quantile_cwnd_pkts(0.45) == 3.0
    assert d.quantile_cwnd_pkts(float(d.cdf[1])) == 3.0  # F(3) = q exactly: 3, not 4
    assert d.quantile_cwnd_pkts(0.80) == 4.0
    assert d.quantile_cwnd_pkts(0.90) == 5.0
    assert d.quantile_cwnd_pkts(1.0) == 5.0
    # "interpolated": state i's mass spread over [i - 1/2, i + 1/2).
    assert d.quantile_cwnd_pkts(0.0, "interpolated") == pytest.approx(1.5)
    assert d.quantile_cwnd_pkts(72 / 334, "interpolated") == pytest.approx(2.0)
    assert d.quantile_cwnd_pkts(234 / 334, "interpolated") == pytest.approx(3.5)
    assert d.quantile_cwnd_pkts(259 / 334, "interpolated") == pytest.approx(4.0)
    assert d.quantile_cwnd_pkts(1.0, "interpolated") == pytest.approx(5.5)
    qs = np.linspace(0.01, 0.99, 50)
    lo = [d.quantile_cwnd_pkts(q) for q in qs]
    it = [d.quantile_cwnd_pkts(q, "interpolated") for q in qs]
    assert all(abs(a - b) <= 0.5 + 1e-12 for a, b in zip(lo, it))
    assert all(a <= b for a, b in zip(it, it[1:]))
    # Rates: Eq. 1 of the cwnd quantile.
    assert d.quantile_rate_bps(0.8, 12000.0, 0.1) == 4 * 12000.0 / 0.1
    mean_pkts = (2 * 144 + 3 * 90 + 4 * 50 + 5 * 50) / 334
    assert d.mean_rate_bps(8.0, 1.0) == pytest.approx(8.0 * mean_pkts)


def test_deterministic():
    a = mk.stationary_distribution(3e-4)
    b = mk.stationary_distribution(3e-4)
    assert np.array_equal(a.probabilities, b.probabilities) and a.cap_pkts == b.cap_pkts
    assert mk.fit_lognormal_sigma(a) == mk.fit_lognormal_sigma(b)


# --------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("p", [0.0, -1e-3, 1.0, 1.5, float("nan"), float("inf"), "x", None])
def test_bad_p_loss(p):
    with pytest.raises(ValueError, match="p_loss"):
        mk.solve_stationary(10, p)
    with pytest.raises(ValueError, match="p_loss"):
        mk.stationary_distribution(p)
    with pytest.raises(ValueError, match="p_loss"):
        mk.expected_cwnd_reno_pkts(p)


@pytest.mark.parametrize("a", [0.0, -2.0, float("nan"), float("inf")])
def test_bad_a(a):
    with pytest.raises(ValueError, match="a must be"):
        mk.solve_stationary(10, 1e-2, a=a)
    with pytest.raises(ValueError, match="a must be"):
        mk.expected_cwnd_reno_pkts(1e-2, a=a)


@pytest.mark.parametrize("cap", [2, 1, 0, -5, 3.5, float("nan"), float("inf"), True, "10"])
def test_bad_cap(cap):
    with pytest.raises(ValueError, match="cap_pkts"):
        mk.solve_stationary(cap, 1e-2)


def test_other_bad_input():
    with pytest.raises(ValueError, match="rtt_s"):
        mk.expected_rate_reno_bps(1e-4, 12000.0, 0.0)
    with pytest.raises(ValueError, match="mss_bits"):
        mk.expected_rate_reno_bps(1e-4, float("nan"), 0.1)
    with pytest.raises(ValueError, match="rtt_s"):
        mk.transition_rates(10, 1e-2, rtt_s=-1.0)
    with pytest.raises(ValueError, match="method"):
        mk.solve_stationary(10, 1e-2, method="lu")
    with pytest.raises(ValueError, match="dense"):
        mk.solve_stationary(mk.MAX_DENSE_STATES + 10, 1e-2, method="dense")
    d = mk.solve_stationary(10, 1e-2)
    for q in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError, match="quantile"):
            d.quantile_cwnd_pkts(q)
    with pytest.raises(ValueError, match="quantile method"):
        d.quantile_cwnd_pkts(0.5, "nearest")
    with pytest.raises(ValueError, match="tol"):
        mk.stationary_distribution(1e-2, tol=0.0)
    with pytest.raises(ValueError, match="growth"):
        mk.stationary_distribution(1e-2, growth=1.0)
    with pytest.raises(ValueError, match="sigma"):
        mk.lognormal_cdf(10.0, 1e-2, sigma=0.0)
    with pytest.raises(ValueError, match="cwnd_pkts"):
        mk.lognormal_cdf(-1.0, 1e-2)
    with pytest.raises(ValueError, match="only states >= 3"):
        mk.halving_target_pkts(2)
    with pytest.raises(ValueError, match="p_loss"):
        mk.p_loss_for_cwnd_reno(0.5)  # Eq. 4 inverted would give P_loss = 3 > 1

r"""The analytic model of seed 000 section 3.1 (Eq. 1) and section 3.2 (Eq. 2): the throughput of
two flows that share congestion state but not their bottleneck ("false sharing").

The seed is OCR text of the paper; both equations came out garbled, and the complete derivation
is in its reference [1] (CMU-CS-01-135), which is not available here. The equations below are
therefore **derived again from the assumptions the text states** and checked against every
number and statement the text gives. What of the OCR this confirms, and what it does not, is said
equation by equation. Units are in the names: ``_pps`` packets/s, ``_s`` seconds, ``_bps`` bit/s.

Assumptions (seed 000 sec. 3.1)
-------------------------------
* Two paths P1, P2 "with high degrees of statistical multiplexing, such that the packet loss rate
  on each path changes negligibly if one flow is added or removed": flow i's packets are lost with
  a fixed probability p_i, whatever the flow does.
* Flows F1, F2 with round-trip times R1, R2 (taken as constants).
* In isolation each is a TCP following the square-root law (Mathis et al.; the "3/2" form of a
  deterministic AIMD sawtooth, one loss per cycle):
  ``lambda_i = (1/R_i) sqrt(3 / (2 p_i))``, i.e. ``p_i = 3 / (2 W_i^2)`` with ``W_i = lambda_i R_i``
  the isolated mean window.
* Shared: the two flows form one macroflow with one congestion window W, which every loss of
  either flow halves, and "they share bandwidth equally": each flow sends at the same rate
  lambda_share.

Derivation of Eq. 1
-------------------
1. Equal rates and one window: flow i has ``lambda_share * R_i`` packets in flight (Little), so
   ``W = lambda_share (R1 + R2)``, i.e. ``lambda_share = W / (R1 + R2)``.
2. Losses: half the macroflow's packets go each way, so a macroflow packet is lost with
   probability ``pbar = (p1 + p2) / 2``; each loss halves W.
3. Increase: one packet per window's worth of ACKs, whichever flow they come from (TCP's and the
   Congestion Manager's per-ACK ``1/W``). ACKs arrive at ``2 lambda_share = 2 W / (R1 + R2)``, so
   ``dW/dt = 2 / (R1 + R2) = 1 / Rbar`` with ``Rbar = (R1 + R2) / 2``.
4. The same deterministic sawtooth as the square-root law: W climbs from W_m/2 to W_m in
   ``T = (W_m / 2) Rbar`` and sends ``(3/8) W_m^2`` packets per cycle, one of which is lost:
   ``(3/8) W_m^2 pbar = 1``, and the mean window is ``3 W_m / 4 = sqrt(3 / (2 pbar))``. The
   macroflow is exactly one TCP with loss rate pbar and RTT Rbar.
5. Hence, in loss rates::

       lambda_share = sqrt(3 / (2 pbar)) / (R1 + R2),   lambda_share^2 = 3 / (2 (R1+R2)^2 pbar)

   and, substituting ``p_i = 3 / (2 lambda_i^2 R_i^2)`` (the 3/2 cancels: any constant of the
   square-root law gives the same result), **Eq. 1 as reconstructed**::

                         sqrt(2) lambda1 lambda2 R1 R2
       lambda_share = ---------------------------------------------
                      (R1 + R2) sqrt(lambda1^2 R1^2 + lambda2^2 R2^2)

   i.e. the shared window ``lambda_share (R1 + R2) = sqrt(2) W1 W2 / sqrt(W1^2 + W2^2)`` is the
   root-mean-square harmonic mean of the isolated windows (``1/W^2 = (1/W1^2 + 1/W2^2) / 2``).

Checks against the text
~~~~~~~~~~~~~~~~~~~~~~~
* Observation (2), "if lambda1 = k lambda2 and R1 = R2 then lambda_share = lambda1 / sqrt(2(k^2+1))":
  **reproduced exactly** (R1 = R2 = R: ``sqrt(2) k lambda2^2 R^2 / (2R R lambda2 sqrt(k^2+1))``);
  k = 1 gives lambda1 / 2: two flows on identical paths act as one TCP and split it.
* Observation (1), ``lambda_share <= min(lambda1, lambda2)``: ``lambda_share <= lambda_i`` is
  ``2 R_i^2 W_j^2 <= (R1+R2)^2 (W1^2 + W2^2)``. It holds **for every lambda1, lambda2 whenever
  the RTTs differ by at most a factor 1 + sqrt(2) ~ 2.414** (then ``2 R_i^2 <= (R1+R2)^2``), in
  particular for equal RTTs, which is every case the paper's numbers are about. Beyond that ratio
  **it does not hold unconditionally in this reconstruction**: it fails for the longer-RTT flow i
  when its isolated window is small enough, ``W_i^2 / W_j^2 < 2 R_i^2 / (R1+R2)^2 - 1``. Example
  (a test pins it): R1 = 10 ms, R2 = 100 ms, lambda1 = 10000 pkt/s, lambda2 = 10 pkt/s gives
  lambda_share = 12.86 pkt/s > lambda2. The short-RTT flow's ACKs grow the shared window faster
  than the long-RTT flow's own ACKs would, and under the fixed-loss-rate assumption nothing
  pushes back. The paper states (1) without a condition; its Eq. 1 contains R_min, which this
  reconstruction does not (see below), so the paper's increase law may differ. The variant
  ``increase="rtt_max"`` of :func:`macroflow_rates_pps` (one packet per longest RTT) makes (1)
  hold for all inputs (``R_i^2 <= R_max (R1 + R2)``) and puts R_min into the formula,
  ``lambda_share^2 = 3 R_min / (2 R1 R2 (R1+R2)(p1+p2))``; it agrees with Eq. 1 whenever R1 = R2.
  Which law the paper used cannot be decided from the OCR; this module's Eq. 1 is the per-ACK one
  (step 3), the law TCP and the Congestion Manager actually use.
* Fig. 1(b)-(d) text: "the faster connection was slowed down by the slower sender exactly as
  predicted": for large k, ``lambda_share -> lambda2 / sqrt(2)`` (R1 = R2): the faster flow falls
  to about 71 % of the *slower* flow's isolated rate, i.e. ~1/k of its own ("falls off as ~1/k").

What of the OCR of Eq. 1 this confirms
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The OCR (seed lines 209-213) is ``3Bmin " A1 A2`` / ``2(R1 + Ry)?`` / ``(Bo+ Ry) \/<R% + R%)
(A2R1 + M3R»)`` / ``where Ry, = min(Ry, Ra)``.

* Confirmed: the left side lambda_share in packets/s; the product ``lambda1 lambda2`` in the
  numerator; a factor ``(R1 + R2)`` multiplying a square root in the denominator; the constants
  ``3`` and ``2 (R1 + R2)^2``, which appear together in the loss-rate form
  ``lambda_share^2 = 3 / (2 (R1+R2)^2 pbar)`` (step 5), though not on one line with
  ``R_min lambda1 lambda2`` as the OCR has them.
* Not confirmed: ``R_min`` (absent from the per-ACK reconstruction; present in the
  ``rtt_max`` variant, above); ``R1^2 + R2^2`` (absent from Eq. 1 as reconstructed; it does appear
  in the equal-*window* variant with the increase clocked by the connection that last lost,
  ``split="window", increase="coco"``, which with a common loss rate p gives a mean window
  ``sqrt(3 (R1^2 + R2^2) / (p (R1+R2)^2))``, but that variant gives the two flows different
  rates when R1 != R2, against "share bandwidth equally"); the OCR's
  ``lambda2 R1 + lambda1 R2``-like factor (the reconstruction has ``lambda1^2 R1^2 + lambda2^2
  R2^2``, each flow's own rate times its own RTT; with R1 = R2 the two readings agree up to the
  squares the OCR may have lost). No formula was made to fit these fragments: nothing but the
  stated assumptions went into the derivation.

Eq. 2 (seed 000 sec. 3.2)
-------------------------
N_a AF and N_b BE long TCP flows; the WRR gives the AF class a fraction alpha of the bottleneck
lambda (packets/s); a two-flow macroflow (one AF, one BE flow) competes with them; equal RTT R.
The test flows' isolated rates are their classes' fair shares, ``lambda_AF = alpha lambda / N_a``
and ``lambda_BE = (1 - alpha) lambda / N_b``, and Eq. 1 with R1 = R2 (where R cancels) gives::

                           alpha (1 - alpha) lambda
    lambda_shared(alpha) = --------------------------------------------------
                           sqrt(2 (alpha^2 N_b^2 + (1 - alpha)^2 N_a^2))

* **The test flows are not counted in N_a, N_b** (N_a = 10, N_b = 40 are the background flows the
  text lists). This is the choice the text's number decides: setting the derivative of
  ``log lambda_shared`` to zero gives ``(1 - alpha)^3 N_a^2 = alpha^3 N_b^2``, so
  ``alpha* = 1 / (1 + (N_b / N_a)^(2/3))`` = **0.28410** for 10 and 40, the text's "28.4 %" to
  every digit it gives; counting the test flows (11 and 41) gives 0.2938, "29.4 %". The OCR of the
  closed form (line 307), ``1+(NI)/N<1) 3``, matches ``1 / (1 + (N_b/N_a)^(2/3))`` (an exponent over 3; with
  ``1/3`` instead the maximum would be at 38.6 %).
* "At alpha ~ 20 %, the input traffic mix is well-matched to the bandwidth allocation":
  ``N_a / (N_a + N_b)`` = 10 / 50 = 20 % makes the AF and BE fair shares equal (k = 1), where
  Eq. 2 gives ``lambda / (2 (N_a + N_b))``: each test flow gets half a fair share.
* OCR (lines 296-297) confirmed: ``alpha (1 - alpha) lambda`` over ``2 (alpha^2 N^2 + (1 - alpha)^2 N^2)`` under
  a root (which N goes with which power of alpha is unreadable; the derivation pairs alpha^2 with
  N_b^2). Not confirmed: the fragments ``3`` and ``8 R R`` beside it; in the reconstruction R
  cancels (Eq. 1 at R1 = R2 does not depend on R), and the text says R is assumed independent of
  alpha.
"""

from __future__ import annotations

import math
import numbers
from typing import Tuple

__all__ = [
    "N_AF_SEED",
    "N_BE_SEED",
    "PACKET_BYTES",
    "pps_from_bps",
    "bps_from_pps",
    "isolated_throughput_pps",
    "loss_rate_for_throughput",
    "lambda_share_pps",
    "macroflow_rates_pps",
    "obs1_rtt_ratio_bound",
    "diffserv_isolated_pps",
    "diffserv_shared_pps",
    "diffserv_argmax_alpha",
    "diffserv_argmax_alpha_numeric",
    "diffserv_matched_alpha",
]

#: The seed's background flows per direction (sec. 3.2): 10 AF and 40 BE long TCP connections.
N_AF_SEED = 10
N_BE_SEED = 40
#: The simulator's TCP packet: 1448 bytes of payload + 52 of headers.
PACKET_BYTES = 1500


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def _positive(name: str, value: object) -> float:
    """`value` as a float if it is finite and > 0; ValueError naming `name` otherwise."""
    v = _number(name, value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def _fraction(name: str, value: object) -> float:
    """`value` as a float if it is strictly between 0 and 1; ValueError naming `name` otherwise."""
    v = _number(name, value)
    if not (0 < v < 1):  # also refuses NaN
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value!r}")
    return v


def pps_from_bps(rate_bps: float, packet_bytes: float = PACKET_BYTES) -> float:
    """A bit rate as packets/s of `packet_bytes`."""
    return _positive("rate_bps", rate_bps) / (8.0 * _positive("packet_bytes", packet_bytes))


def bps_from_pps(rate_pps: float, packet_bytes: float = PACKET_BYTES) -> float:
    """Packets/s of `packet_bytes` as bit/s."""
    return _positive("rate_pps", rate_pps) * 8.0 * _positive("packet_bytes", packet_bytes)


def isolated_throughput_pps(loss_rate: float, rtt_s: float) -> float:
    """The square-root law the seed's model starts from: ``(1/R) sqrt(3 / (2 p))`` packets/s."""
    p = _fraction("loss_rate", loss_rate)
    return math.sqrt(1.5 / p) / _positive("rtt_s", rtt_s)


def loss_rate_for_throughput(throughput_pps: float, rtt_s: float) -> float:
    """The inverse of :func:`isolated_throughput_pps`: ``3 / (2 (lambda R)^2)`` (may exceed 1 for
    a window under 1.23 packets, where the law says nothing)."""
    w = _positive("throughput_pps", throughput_pps) * _positive("rtt_s", rtt_s)
    return 1.5 / (w * w)


def lambda_share_pps(lambda1_pps: float, lambda2_pps: float, rtt1_s: float, rtt2_s: float) -> float:
    """Eq. 1 (reconstructed, see the module docs): the rate of each of two flows sharing one
    congestion window and bandwidth equally, from their isolated rates and RTTs::

        sqrt(2) l1 l2 R1 R2 / ((R1 + R2) sqrt(l1^2 R1^2 + l2^2 R2^2))
    """
    l1, l2 = _positive("lambda1_pps", lambda1_pps), _positive("lambda2_pps", lambda2_pps)
    r1, r2 = _positive("rtt1_s", rtt1_s), _positive("rtt2_s", rtt2_s)
    w1, w2 = l1 * r1, l2 * r2
    # sqrt(2) w1 w2 / hypot(w1, w2) without overflow for huge windows.
    big, small = max(w1, w2), min(w1, w2)
    return math.sqrt(2.0) * small / math.sqrt(1.0 + (small / big) ** 2) / (r1 + r2)


_SPLITS = ("rate", "window")
_INCREASES = ("ack", "rtt_max", "rtt_min", "coco")


def macroflow_rates_pps(
    lambda1_pps: float,
    lambda2_pps: float,
    rtt1_s: float,
    rtt2_s: float,
    *,
    split: str = "rate",
    increase: str = "ack",
) -> Tuple[float, float]:
    """The two flows' rates under one shared AIMD window, for other splitting and increase laws
    than Eq. 1's (the same sawtooth derivation, steps 2-5 of the module docs, in general form).

    `split`: ``"rate"`` (the paper's: equal bandwidth, ``r_i = W / (R1 + R2)``) or ``"window"``
    (equal windows, ``r_i = W / (2 R_i)``: ctrlTCP with equal priorities, our ``ccc`` coupler).
    `increase`, the growth of W between losses: ``"ack"`` (one packet per window of ACKs from
    either flow; Eq. 1), ``"rtt_max"`` / ``"rtt_min"`` (one packet per longest / shortest RTT), or
    ``"coco"`` (ctrlTCP: one packet per RTT of the coordinating connection, the one whose loss
    began the last loss event, so ``1/R_i`` weighted by flow i's share of the loss events; a
    mean-rate approximation).

    With per-window-unit rates ``s_i`` (``r_i = W s_i``) and increase rate ``a`` (packets/s), one
    loss per cycle gives a mean window ``W^2 = 3a / (2 sum p_i s_i) = a / sum(s_i / W_i^2)``.
    ``split="rate", increase="ack"`` returns ``(lambda_share, lambda_share)`` of Eq. 1. With
    R1 = R2 every combination equals Eq. 1.
    """
    l1, l2 = _positive("lambda1_pps", lambda1_pps), _positive("lambda2_pps", lambda2_pps)
    r1, r2 = _positive("rtt1_s", rtt1_s), _positive("rtt2_s", rtt2_s)
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    if increase not in _INCREASES:
        raise ValueError(f"increase must be one of {_INCREASES}, got {increase!r}")
    w1, w2 = l1 * r1, l2 * r2
    s = (1 / (r1 + r2), 1 / (r1 + r2)) if split == "rate" else (1 / (2 * r1), 1 / (2 * r2))
    # Loss intensity per unit of window, up to the law's constant: p_i s_i with p_i ~ 1 / W_i^2.
    q = (s[0] / (w1 * w1), s[1] / (w2 * w2))
    if increase == "ack":
        a = s[0] + s[1]  # ACK rate / W
    elif increase == "rtt_max":
        a = 1 / max(r1, r2)
    elif increase == "rtt_min":
        a = 1 / min(r1, r2)
    else:
        a = (q[0] / r1 + q[1] / r2) / (q[0] + q[1])
    w = math.sqrt(a / (q[0] + q[1]))
    return (w * s[0], w * s[1])


def obs1_rtt_ratio_bound() -> float:
    """The largest RTT ratio for which Eq. 1 as reconstructed keeps observation (1),
    ``lambda_share <= min(lambda1, lambda2)``, for every pair of isolated rates: 1 + sqrt(2)."""
    return 1.0 + math.sqrt(2.0)


def diffserv_isolated_pps(alpha: float, bottleneck_pps: float, n_af: float, n_be: float) -> Tuple[float, float]:
    """The AF and BE test flows' isolated rates in Eq. 2's setting: their classes' fair shares,
    ``alpha lambda / N_a`` and ``(1 - alpha) lambda / N_b`` (test flows not counted in N)."""
    a = _fraction("alpha", alpha)
    lam = _positive("bottleneck_pps", bottleneck_pps)
    na, nb = _positive("n_af", n_af), _positive("n_be", n_be)
    return a * lam / na, (1 - a) * lam / nb


def diffserv_shared_pps(alpha: float, bottleneck_pps: float, n_af: float, n_be: float) -> float:
    """Eq. 2: the rate of each flow of a one-AF, one-BE macroflow when the AF class gets a fraction
    `alpha` of a bottleneck of `bottleneck_pps`, shared with `n_af` AF and `n_be` BE flows::

        alpha (1 - alpha) lambda / sqrt(2 (alpha^2 N_b^2 + (1 - alpha)^2 N_a^2))

    (Eq. 1 at R1 = R2 on :func:`diffserv_isolated_pps`; the RTT cancels.)"""
    a = _fraction("alpha", alpha)
    lam = _positive("bottleneck_pps", bottleneck_pps)
    na, nb = _positive("n_af", n_af), _positive("n_be", n_be)
    return a * (1 - a) * lam / math.sqrt(2.0 * ((a * nb) ** 2 + ((1 - a) * na) ** 2))


def diffserv_argmax_alpha(n_af: float, n_be: float) -> float:
    """The alpha maximising Eq. 2, in closed form: ``1 / (1 + (N_b / N_a)^(2/3))`` (from
    ``(1 - alpha)^3 N_a^2 = alpha^3 N_b^2``); 0.28410 for the seed's 10 and 40."""
    na, nb = _positive("n_af", n_af), _positive("n_be", n_be)
    return 1.0 / (1.0 + (nb / na) ** (2.0 / 3.0))


def diffserv_argmax_alpha_numeric(n_af: float, n_be: float, tol: float = 1e-12) -> float:
    """The alpha maximising Eq. 2 found numerically (golden-section search on (0, 1); Eq. 2 is
    unimodal there: its log-derivative vanishes only at the closed form's point), the bracket
    shrunk to `tol`. Near a maximum the function is flat, so floating-point comparisons place
    alpha only to about sqrt(machine epsilon), ~1e-8, whatever `tol` is."""
    na, nb = _positive("n_af", n_af), _positive("n_be", n_be)
    tol = _positive("tol", tol)

    def f(a: float) -> float:
        return diffserv_shared_pps(a, 1.0, na, nb)

    g = (math.sqrt(5.0) - 1.0) / 2.0
    lo, hi = 0.0, 1.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    while hi - lo > tol:
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
    return (lo + hi) / 2.0


def diffserv_matched_alpha(n_af: float, n_be: float) -> float:
    """The alpha at which the AF and BE fair shares are equal, ``N_a / (N_a + N_b)``: the text's
    "at alpha ~ 20 %, the input traffic mix is well-matched to the bandwidth allocation"."""
    na, nb = _positive("n_af", n_af), _positive("n_be", n_be)
    return na / (na + nb)

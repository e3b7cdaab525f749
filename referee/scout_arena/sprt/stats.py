"""The sequential test itself: a generalized SPRT on paired differences, no I/O.

Anchors. fastchess and cutechess-cli stop an engine match with Wald's SPRT, bounds
``log(beta / (1 - alpha))`` and ``log((1 - beta) / alpha)``. Fishtest (Stockfish's testing
framework) plays games in pairs on one opening with the colours reversed, treats the *pair* as
the statistical unit (the pentanomial model: five possible pair scores) and runs a generalized
SPRT on it, ``LLRcalc.LLR_alt2`` being its normal approximation (M. Van den Bergh,
"GSPRT approximation"):

    LLR = N * (s1 - s0) * (2 s - s0 - s1) / (2 var)
        = (s1 - s0) / var * (sum_i x_i - N (s0 + s1) / 2)

with ``s`` and ``var`` the mean and the (maximum-likelihood) variance of the observed pair
results. Here the observations ``x_i`` are paired score (or win-share) differences on
duplicate deals and ``s0``/``s1`` the hypotheses ``h0``/``h1`` in the same unit.

One change, for small runs. Fishtest's runs have thousands of pairs, where the plug-in variance
is exact enough. A SCOUT test with a coarse margin decides in a few dozen units, and then a
variance that came out small by chance lets the LLR cross a bound early: with the plain formula
a simulated test of a bot against itself accepted H1 in 15-20 % of runs at alpha = 5 %. So the
variance used is the one-sided 90 % upper confidence limit of the variance,
``sum_i (x_i - mean)^2 / chi2_{N-1}(0.10)``, which tends to the plug-in estimate as N grows
(1.72 times it at N = 20, 1.23 at 100, 1.09 at 500, 1.03 at 5000) and brings the error rates
back to about their nominal values (tests/test_sprt.py measures them). It is floored at
``((h1 - h0) / 4)^2``, so that identical deterministic bots (every difference exactly 0)
accept H0 instead of dividing by zero.
``SequentialTest.llr_plain`` keeps fishtest's formula for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["VARIANCE_CONFIDENCE", "Decision", "SequentialTest", "bounds", "chi2_quantile",
           "t_quantile"]

#: The variance in the LLR is this one-sided upper confidence limit of the observed variance.
VARIANCE_CONFIDENCE = 0.90
#: The variance is never taken below ((h1 - h0) / VARIANCE_FLOOR_DIVISOR) ** 2.
VARIANCE_FLOOR_DIVISOR = 4.0


class Decision:
    H0 = "H0"
    H1 = "H1"


def bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's bounds: accept H0 at or below the first, H1 at or above the second."""
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


# ----- distribution quantiles (the standard library has the normal one only) ----------------

def _gamma_p(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x) (series / continued fraction,
    as in Numerical Recipes)."""
    if x <= 0:
        return 0.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        k = a
        for _ in range(1000):
            k += 1
            term *= x / k
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return total * math.exp(log_front)
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return 1 - math.exp(log_front) * h


def _beta_cf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (tiny if abs(d) < tiny else d)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for an in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                   -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1 + an * d
            d = 1 / (tiny if abs(d) < tiny else d)
            c = 1 + an / c
            c = tiny if abs(c) < tiny else c
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _beta_i(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_cf(a, b, x) / a
    return 1 - front * _beta_cf(b, a, 1 - x) / b


def _bisect(f: Callable[[float], float], lo: float, hi: float, q: float) -> float:
    """The x in [lo, ...) where the increasing f reaches q."""
    while f(hi) < q:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@lru_cache(maxsize=4096)
def chi2_quantile(k: int, q: float) -> float:
    """The q-quantile of the chi-squared distribution with k degrees of freedom."""
    if k < 1 or not 0 < q < 1:
        raise ValueError("chi2_quantile needs k >= 1 and 0 < q < 1")
    return _bisect(lambda x: _gamma_p(k / 2, x / 2), 0.0, float(k) + 10, q)


@lru_cache(maxsize=4096)
def t_quantile(nu: int, p: float) -> float:
    """The p-quantile of Student's t distribution with nu degrees of freedom (p > 1/2)."""
    if nu < 1 or not 0.5 <= p < 1:
        raise ValueError("t_quantile needs nu >= 1 and 1/2 <= p < 1")

    def cdf(t: float) -> float:
        return 1 - 0.5 * _beta_i(nu / 2, 0.5, nu / (nu + t * t))

    return _bisect(cdf, 0.0, 10.0, p)


# ----- the test ---------------------------------------------------------------------------------

@dataclass
class SequentialTest:
    """A GSPRT of H0: mean difference = h0 against H1: mean difference = h1 (h1 > h0) on
    independent observations (here: one per duplicate deal), updated one observation at a
    time. ``decision`` is "H0", "H1" or None (go on)."""

    h0: float
    h1: float
    alpha: float = 0.05
    beta: float = 0.05
    n: int = 0
    mean: float = 0.0
    #: Sum of squared deviations from the running mean (Welford).
    m2: float = 0.0
    values: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.h1 > self.h0:
            raise ValueError("H1 must be above H0 (--h1 > --h0)")
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5):
            raise ValueError("--alpha and --beta are between 0 and 0.5")

    @property
    def bounds(self) -> tuple[float, float]:
        return bounds(self.alpha, self.beta)

    def add(self, x: float) -> None:
        self.values.append(x)
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    @property
    def total(self) -> float:
        return self.mean * self.n

    @property
    def variance_ml(self) -> float:
        """The maximum-likelihood variance, sum (x - mean)^2 / n (fishtest's ``stats``)."""
        return self.m2 / self.n if self.n else 0.0

    @property
    def variance_used(self) -> float:
        """The variance in the LLR: the one-sided upper confidence limit
        sum (x - mean)^2 / chi2_{n-1}(1 - VARIANCE_CONFIDENCE), floored (see the module)."""
        floor = ((self.h1 - self.h0) / VARIANCE_FLOOR_DIVISOR) ** 2
        if self.n < 2:
            return math.inf
        return max(self.m2 / chi2_quantile(self.n - 1, 1 - VARIANCE_CONFIDENCE), floor)

    def _llr(self, variance: float) -> float:
        if self.n < 2 or not math.isfinite(variance) or variance <= 0:
            return 0.0
        return (self.h1 - self.h0) / variance * (self.total - self.n * (self.h0 + self.h1) / 2)

    @property
    def llr(self) -> float:
        """(h1 - h0) / var * (sum x - n (h0 + h1) / 2) with ``variance_used``."""
        return self._llr(self.variance_used)

    @property
    def llr_plain(self) -> float:
        """Fishtest's LLR_alt2 with the plug-in variance, for comparison (0 while undefined)."""
        return self._llr(self.variance_ml)

    @property
    def decision(self) -> str | None:
        lower, upper = self.bounds
        llr = self.llr
        if llr >= upper:
            return Decision.H1
        if llr <= lower:
            return Decision.H0
        return None

    @property
    def sd(self) -> float:
        """The sample standard deviation (n - 1 in the denominator)."""
        return math.sqrt(self.m2 / (self.n - 1)) if self.n >= 2 else math.nan

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """mean -+ t_{n-1} * sd / sqrt(n). Taken at a sequential test's stopping time it is
        somewhat optimistic (the test stops when the mean happens to be far from the other
        hypothesis); it is the usual report all the same."""
        if self.n < 2:
            return (-math.inf, math.inf)
        half = t_quantile(self.n - 1, 0.5 + confidence / 2) * self.sd / math.sqrt(self.n)
        return (self.mean - half, self.mean + half)

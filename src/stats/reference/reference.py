"""Reference implementation of the new gate's decision rules (throughline issue 14).

Pure functions, no state, no randomness. Inputs are natural logs of tokens/s (or, for latency
gates, *negated* logs of latency: see `latency_to_gate_scale`). Everything the Rust port needs
is here; calibrate.py re-implements the same formulas vectorised and checks them against this
file.

Model, per level:  y = mu + arm_effect + a_session + e_trial,
    a_session ~ N(0, sigma_b^2)  (one offset per server start, per level),
    e_trial   ~ N(0, sigma_w^2)  (within-session noise).
The comparison statistic is always  d = mean(head) - mean(base)  on the log scale
(ratio = exp(d); d < 0 is a drop), a standard error se, and Student t degrees of freedom df.

Three ways to get (d, se, df), chosen by the shape of the data:
  relative, one session      -> Welch on trials (the shared session offset cancels)
  relative, restarts         -> Welch on session (block) means, one mean per server start
  history                    -> candidate session mean vs baseline session means:
                                prediction-interval t with k-1 df (Satterthwaite if n_c != n_b)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict
from typing import Optional, Sequence

from scipy.stats import t as student_t

ALPHA = 0.01        # family-wise budget: 0.008 main test + 0.001 guard + 0.001 kept for the
ALPHA_MAIN = 0.008  #   guard's session-effect leakage (sigma_b 8%, k = 2 costs ~0.15%)
ALPHA_GUARD = 0.001 # the guard's within-session test (Holm over levels)
MIN_EFFECT = 0.03   # a drop must be at least this big to FAIL
GUARD = 0.25        # gross-regression guard
POWER = 0.80        # for the smallest detectable drop
PASS_CONFIDENCE = 0.95  # "pass": the one-sided bound at this confidence, at every level (issue 26)
TOLERANCE = 0.05    # ... lies above 1 - TOLERANCE
OUTLIER_Z = 5.0     # robust-z threshold of the outlier rule
MAD_K = 1.482602218505602  # 1 / Phi^-1(3/4)


# ---------------------------------------------------------------- small helpers

def mean(x: Sequence[float]) -> float:
    return sum(x) / len(x)


def var(x: Sequence[float]) -> float:
    """Sample variance, divisor n-1."""
    m = mean(x)
    return sum((v - m) ** 2 for v in x) / (len(x) - 1)


def median(x: Sequence[float]) -> float:
    s = sorted(x)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def t_cdf(x: float, df: float) -> float:
    return float(student_t.cdf(x, df))


def t_ppf(q: float, df: float) -> float:
    return float(student_t.ppf(q, df))


def welch(base: Sequence[float], head: Sequence[float]):
    """d = mean(head) - mean(base), se, Welch-Satterthwaite df. Needs >= 2 values per side."""
    nb, nh = len(base), len(head)
    vb, vh = var(base) / nb, var(head) / nh
    se2 = vb + vh
    d = mean(head) - mean(base)
    if se2 == 0.0:
        return d, 0.0, float(nb + nh - 2)
    df = se2 ** 2 / (vb ** 2 / (nb - 1) + vh ** 2 / (nh - 1))
    return d, math.sqrt(se2), df


def holm(p: Sequence[float]) -> list:
    """Holm step-down adjusted p-values (same as src/stats/welch.rs::holm)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def group(values: Sequence[float], labels: Sequence) -> dict:
    """label -> list of values, labels in first-seen order."""
    g: dict = {}
    for v, l in zip(values, labels):
        g.setdefault(l, []).append(v)
    return g


def pooled_within(cells: Sequence[Sequence[float]]):
    """Pooled within-cell variance and its df over cells with >= 2 values."""
    ss = sum(sum((v - mean(c)) ** 2 for v in c) for c in cells if len(c) >= 2)
    df = sum(len(c) - 1 for c in cells if len(c) >= 2)
    return (ss / df if df > 0 else float("nan")), df


# ---------------------------------------------------------------- outlier rule

def outlier_mask_relative(base: Sequence[float], head: Sequence[float], z: float = OUTLIER_Z):
    """Outlier rule for one level of a relative comparison inside ONE session.

    mb, mh = median(base), median(head);
    s = MAD_K * median of the 2n own-arm residuals {|y - mb| : base} U {|y - mh| : head};
    a trial is an outlier when its distance to the NEARER arm median, min(|y-mb|, |y-mh|),
    exceeds z * s (z = 5). Returns (mask_base, mask_head). Nothing is dropped when s == 0.
    Symmetric in the arms and never picks a mode inside one arm: a trial that sits with the
    other arm's bulk is kept, so an arm whose majority is slow keeps all its trials.
    """
    mb, mh = median(base), median(head)
    s = MAD_K * median([abs(v - mb) for v in base] + [abs(v - mh) for v in head])
    if s <= 0:
        return [False] * len(base), [False] * len(head)
    f = lambda v: min(abs(v - mb), abs(v - mh)) > z * s
    return [f(v) for v in base], [f(v) for v in head]


# ---------------------------------------------------------------- one level

@dataclass
class Level:
    mode: str                 # "relative", "relative-restarts", "history"
    d: float                  # mean ln head - mean ln base
    se: float
    df: float
    se_w: float               # within-session-only se of d (for the guard)
    df_w: float
    sigma_w: float
    sigma_b: Optional[float]  # sqrt(max(0, est)); None when not estimable
    sigma_b2_raw: Optional[float]  # untruncated estimate (may be < 0)
    sigma_b_df: Optional[float]
    n_base: int
    n_head: int
    dropped_base: int = 0
    dropped_head: int = 0
    p: float = float("nan")
    p_guard: float = float("nan")
    # filled by decide():
    ratio: float = float("nan")
    p_holm: float = float("nan")
    p_guard_holm: float = float("nan")
    lower: float = float("nan")   # one-sided bound at level 1 - alpha/m
    upper: float = float("nan")
    pass_lower: float = float("nan")  # one-sided bounds at PASS_CONFIDENCE (no multiplicity correction)
    pass_upper: float = float("nan")
    mdd: float = float("nan")     # smallest drop detected with POWER at alpha/m
    outcome: str = ""
    notes: list = field(default_factory=list)


def _finish(lv: Level, guard: float) -> Level:
    """p = P(T_df <= d/se) (one-sided, 'head slower');
    p_guard = P(T_df_w <= (d - ln(1 - guard)) / se_w): H0 'drop <= guard' on within-session noise."""
    lv.ratio = math.exp(lv.d)
    if lv.se > 0 and lv.df > 0:
        lv.p = t_cdf(lv.d / lv.se, lv.df)
    elif lv.se == 0 and lv.df > 0:
        lv.p = 0.0 if lv.d < 0 else 1.0
    else:  # not estimable (history k = 1)
        lv.p = 1.0
    if lv.se_w > 0 and lv.df_w > 0:
        lv.p_guard = t_cdf((lv.d - math.log(1 - guard)) / lv.se_w, lv.df_w)
    else:
        lv.p_guard = 1.0
    return lv


def relative_level(base, head, base_session=None, head_session=None,
                   robust=True, guard=GUARD) -> Level:
    """Relative (A/B in one job) comparison at one level.

    base/head: ln tok/s per trial. *_session: server-start label per trial (None = one session
    for the whole job, shared by both arms). If either arm has more than one session, the unit
    of replication is the session: Welch on session means.
    """
    base, head = list(base), list(head)
    bs = list(base_session) if base_session is not None else [0] * len(base)
    hs = list(head_session) if head_session is not None else [0] * len(head)
    nb0, nh0 = len(base), len(head)
    one_session = len(set(bs)) <= 1 and len(set(hs)) <= 1
    if robust and one_session:   # the rule is used only where both arms share one session
        mask_b, mask_h = outlier_mask_relative(base, head)
        keep_b = [not m for m in mask_b]
        keep_h = [not m for m in mask_h]
        base = [v for v, k in zip(base, keep_b) if k]
        bs = [s for s, k in zip(bs, keep_b) if k]
        head = [v for v, k in zip(head, keep_h) if k]
        hs = [s for s, k in zip(hs, keep_h) if k]
    gb, gh = group(base, bs), group(head, hs)
    s2w, dfw = pooled_within(list(gb.values()) + list(gh.values()))
    restarts = len(gb) > 1 or len(gh) > 1
    if not restarts:
        if len(base) < 3 or len(head) < 3:   # too many trials dropped: not decidable
            d, se, df = mean(head) - mean(base), float("nan"), 0.0
        else:
            d, se, df = welch(base, head)
        lv = Level("relative", d, se, df, se, df, math.sqrt(s2w), None, None, None,
                   len(base), len(head))
    else:
        mb = [mean(c) for c in gb.values()]
        mh = [mean(c) for c in gh.values()]
        if len(mb) < 2 or len(mh) < 2:
            d, se, df = mean(mh) - mean(mb), float("nan"), 0.0
        else:
            d, se, df = welch(mb, mh)
        # sigma_b^2 from session means: var(means) - s_w^2 / n_harmonic (pooled over arms)
        cells = list(gb.values()) + list(gh.values())
        nhm = len(cells) / sum(1 / len(c) for c in cells)
        s2m, dfm = pooled_within([mb, mh])
        sb2 = s2m - s2w / nhm if dfm > 0 else None
        se_w = math.sqrt(s2w * (1 / len(base) + 1 / len(head))) if dfw > 0 else 0.0
        lv = Level("relative-restarts", d, se, df, se_w, float(dfw), math.sqrt(s2w),
                   None if sb2 is None else math.sqrt(max(0.0, sb2)), sb2,
                   float(dfm), len(base), len(head))
    lv.dropped_base, lv.dropped_head = nb0 - len(base), nh0 - len(head)
    return _finish(lv, guard)


def history_level(base_sessions: Sequence[Sequence[float]], cand: Sequence[float],
                  guard=GUARD) -> Level:
    """History mode at one level: k baseline sessions (ln tok/s lists) vs one candidate session.

    d = ybar_c - mean_i(ybar_i);  V = s_m^2 (1 + 1/k) + max(0, 1/n_c - 1/n_h) s_w^2,
    s_m^2 = sample variance of the k baseline session means (k-1 df, unbiased, never truncated),
    s_w^2 = pooled within-session variance (baseline and candidate sessions),
    n_h = harmonic mean of the baseline sessions' trial counts; Satterthwaite df.
    """
    # No outlier rule here: the candidate is one session among k+1, so a level-wide median
    # would call a real regression an outlier, and a per-session median can pick the slow
    # mode. Slow trials simply enter the session means (and s_m^2).
    sessions = [list(s) for s in base_sessions] + [list(cand)]
    dropped_b = dropped_h = 0
    base, cand = sessions[:-1], sessions[-1]
    k = len(base)
    s2w, dfw = pooled_within(sessions)
    mb = [mean(s) for s in base]
    d = mean(cand) - mean(mb)
    nc = len(cand)
    nh = k / sum(1 / len(s) for s in base)
    se_w = math.sqrt(s2w * (1 / nc + 1 / sum(len(s) for s in base))) if dfw > 0 else 0.0
    if k >= 2:
        s2m = var(mb)
        a = s2m * (1 + 1 / k)
        c = max(0.0, 1 / nc - 1 / nh) * s2w
        V = a + c
        df = V ** 2 / (a ** 2 / (k - 1) + (c ** 2 / dfw if c > 0 else 0.0)) if V > 0 else float(k - 1)
        se = math.sqrt(V)
        sb2 = s2m - s2w / nh
        lv = Level("history", d, se, df, se_w, float(dfw), math.sqrt(s2w),
                   math.sqrt(max(0.0, sb2)), sb2, float(k - 1), sum(len(s) for s in base), nc)
    else:
        lv = Level("history", d, float("nan"), 0.0, se_w, float(dfw), math.sqrt(s2w),
                   None, None, 0.0, sum(len(s) for s in base), nc)
        lv.notes.append("one baseline session: sigma_b unknown, only the gross-regression guard applies")
    lv.dropped_base, lv.dropped_head = dropped_b, dropped_h
    return _finish(lv, guard)


# ---------------------------------------------------------------- the decision

def decide(levels: Sequence[Level], alpha=ALPHA_MAIN, alpha_guard=ALPHA_GUARD,
           min_effect=MIN_EFFECT, power=POWER, pass_confidence=PASS_CONFIDENCE,
           tolerance=TOLERANCE) -> str:
    """Holm across levels, per-level outcome, overall verdict. a = alpha (main, 0.008).

    REGRESSION at a level:  (p_holm < a and ratio <= 1 - min_effect)
                            or p_guard_holm < alpha_guard    (gross-regression guard)
    NO_REGRESSION:          one-sided bound at pass_confidence  >  1 - tolerance
                            (every level must pass: an intersection-union claim, so no
                            multiplicity correction; its error is a missed regression)
    smallest detectable drop: 1 - exp(-(t_{1-a/m,df} + t_{power,df}) se)
    INCONCLUSIVE:           otherwise.
    Overall: REGRESSION if any level is; NO_REGRESSION if all are; else INCONCLUSIVE.
    """
    m = len(levels)
    alpha_g = alpha_guard
    ph = holm([lv.p for lv in levels])
    pg = holm([lv.p_guard for lv in levels])
    q = 1 - alpha / m
    for lv, a, b in zip(levels, ph, pg):
        lv.p_holm, lv.p_guard_holm = a, b
        if lv.df > 0 and math.isfinite(lv.se):
            tq = t_ppf(q, lv.df)
            lv.lower = math.exp(lv.d - tq * lv.se)
            lv.upper = math.exp(lv.d + tq * lv.se)
            lv.mdd = 1 - math.exp(-(tq + t_ppf(power, lv.df)) * lv.se)
            tp = t_ppf(pass_confidence, lv.df)
            lv.pass_lower = math.exp(lv.d - tp * lv.se)
            lv.pass_upper = math.exp(lv.d + tp * lv.se)
        else:
            lv.lower, lv.upper, lv.mdd = 0.0, math.inf, math.inf
            lv.pass_lower, lv.pass_upper = 0.0, math.inf
        if (a < alpha and lv.ratio <= 1 - min_effect) or b < alpha_g:
            lv.outcome = "REGRESSION"
            if not (a < alpha and lv.ratio <= 1 - min_effect):
                lv.notes.append("gross-regression guard")
        elif lv.pass_lower > 1 - tolerance:
            lv.outcome = "NO_REGRESSION"
        else:
            lv.outcome = "INCONCLUSIVE"
    outs = [lv.outcome for lv in levels]
    if "REGRESSION" in outs:
        return "REGRESSION"
    if all(o == "NO_REGRESSION" for o in outs):
        return "NO_REGRESSION"
    return "INCONCLUSIVE"


# ---------------------------------------------------------------- drift

def drift_check(resid_keys, values, rounds, sessions, alpha=0.005, min_size=0.01):
    """Trend across interleaved rounds, pooled over levels and arms.

    resid_keys: per trial, the cell it is centred in (level, arm, session).
    e = y - mean(cell); round mean ebar_r over all trials of round r (rounds numbered
    globally, each inside one session). OLS of ebar_r on r with one intercept per session:
    b = sum (r - rbar_s) ebar_r / sum (r - rbar_s)^2, residual df = R - S - 1,
    t = b / se(b).  size = b * (rounds per session - 1) (the fall over the run, log scale).
    Flag "server drifted" when the two-sided p < alpha and |size| >= min_size (min_size None:
    p only). Returns dict(slope, t, df, p, size, flag); None when df < 1.
    """
    g = group(range(len(values)), resid_keys)
    e = [0.0] * len(values)
    for idx in g.values():
        m = mean([values[i] for i in idx])
        for i in idx:
            e[i] = values[i] - m
    rg = group(range(len(values)), rounds)
    rlist = sorted(rg)
    ebar = {r: mean([e[i] for i in rg[r]]) for r in rlist}
    sess_of = {r: sessions[rg[r][0]] for r in rlist}
    sg = group(rlist, [sess_of[r] for r in rlist])
    R, S = len(rlist), len(sg)
    df = R - S - 1
    if df < 1:
        return None
    sxx = sxy = 0.0
    for rs in sg.values():
        rb = mean(rs)
        yb = mean([ebar[r] for r in rs])
        for r in rs:
            sxx += (r - rb) ** 2
            sxy += (r - rb) * (ebar[r] - yb)
    b = sxy / sxx
    rss = 0.0
    for rs in sg.values():
        rb = mean(rs)
        yb = mean([ebar[r] for r in rs])
        for r in rs:
            rss += (ebar[r] - yb - b * (r - rb)) ** 2
    se = math.sqrt(rss / df / sxx)
    tt = b / se if se > 0 else math.copysign(math.inf, b)
    p = 2 * t_cdf(-abs(tt), df)
    span = max(len(rs) for rs in sg.values()) - 1
    size = b * span
    flag = p < alpha and (min_size is None or abs(size) >= min_size)
    return dict(slope=b, t=tt, df=df, p=p, size=size, flag=flag)


# ---------------------------------------------------------------- latency

def latency_to_gate_scale(latencies_s: Sequence[float]) -> list:
    """Latency gates (TTFT p99 etc., higher is worse): gate y = -ln(latency).

    Then 'head slower' = y drops, and every rule above applies unchanged; the reported ratio
    exp(d) is base/head latency, so a latency rise of x% is ratio 1/(1+x). Use the metric's
    own min effect, expressed as m_lat -> min_effect = 1 - 1/(1 + m_lat).
    """
    return [-math.log(v) for v in latencies_s]


def level_dict(lv: Level) -> dict:
    return asdict(lv)

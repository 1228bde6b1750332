"""Seeded, vectorised calibration of the gate rules in reference.py.

Run:  nice -n 19 python3 calibrate.py [reps]      (default 20000 replications per cell)
Writes calib_results.json and prints the tables pasted into results.md.
"""
import json
import math
import sys
import time

import numpy as np
from scipy.stats import t as T, norm

import reference as ref

ALPHA_G = ref.ALPHA_GUARD
ALPHA, ME, GUARD, POWER = ref.ALPHA_MAIN, ref.MIN_EFFECT, ref.GUARD, ref.POWER
L = 5
SW = math.sqrt(math.log(1 + 0.02 ** 2))       # within-session CV 2%, lognormal
SLOW = math.log(146 / 215)                    # slow mode of the real llama.cpp server
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


# ------------------------------------------------------------------ vectorised statistics

def nmean(x, axis):
    return np.nanmean(x, axis=axis)


def nvar(x, axis):
    n = np.sum(~np.isnan(x), axis=axis)
    m = np.nanmean(x, axis=axis, keepdims=True)
    return np.nansum((x - m) ** 2, axis=axis) / (n - 1), n


def welch_v(b, h):
    """b, h: (..., n) with NaN = missing. Returns d, se, df."""
    vb, nb = nvar(b, -1)
    vh, nh = nvar(h, -1)
    vb, vh = vb / nb, vh / nh
    se2 = vb + vh
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2 ** 2 / (vb ** 2 / (nb - 1) + vh ** 2 / (nh - 1))
    df = np.where(se2 == 0, nb + nh - 2, df)
    return nmean(h, -1) - nmean(b, -1), np.sqrt(se2), df


def yuen_v(b, h, trim=0.2):
    out = []
    for x in (b, h):
        n = x.shape[-1]
        g = int(math.floor(trim * n))
        s = np.sort(x, -1)
        tm = s[..., g:n - g].mean(-1)
        w = s.copy()
        w[..., :g] = s[..., g:g + 1]
        w[..., n - g:] = s[..., n - g - 1:n - g]
        sw2 = w.var(-1, ddof=1)
        hh = n - 2 * g
        out.append((tm, (n - 1) * sw2 / (hh * (hh - 1)), hh))
    (mb, db, hb), (mh, dh, hh) = out
    se2 = db + dh
    df = se2 ** 2 / (db ** 2 / (hb - 1) + dh ** 2 / (hh - 1))
    return mh - mb, np.sqrt(se2), df


def outlier_nan(y, cell_axis_len=None, z=ref.OUTLIER_Z, per_cell=False):
    """y: (reps, L, cells, m): all trials of a level (every arm, every session).
    Rule of reference.outlier_mask: centre = median of ALL trials of the level,
    s = MAD_K * median |y - centre|, drop |y - centre| > z s. Returns y with outliers = NaN.
    per_cell=True: the rejected variant (centre = each cell's own median)."""
    reps, nl = y.shape[:2]
    if per_cell:
        med = np.median(y, -1, keepdims=True)
        r = y - med
        a = np.abs(r).reshape(reps, nl, -1)
        a = np.where(a == 0, np.nan, a)
        s = ref.MAD_K * np.nanmedian(a, -1)[:, :, None, None]
        return np.where(np.abs(r) > z * s, np.nan, y)
    flat = y.reshape(reps, nl, -1)
    med = np.median(flat, -1)[:, :, None, None]
    r = y - med
    s = ref.MAD_K * np.median(np.abs(r).reshape(reps, nl, -1), -1)[:, :, None, None]
    return np.where(np.abs(r) > z * s, np.nan, y)


def outlier_nan_rel(b, h, z=ref.OUTLIER_Z):
    """Relative one-session rule (reference.outlier_mask_relative). b, h: (reps, L, n)."""
    mb = np.median(b, -1, keepdims=True)
    mh = np.median(h, -1, keepdims=True)
    own = np.concatenate([np.abs(b - mb), np.abs(h - mh)], -1)
    s = ref.MAD_K * np.median(own, -1, keepdims=True)
    rb = np.minimum(np.abs(b - mb), np.abs(b - mh))
    rh = np.minimum(np.abs(h - mb), np.abs(h - mh))
    return np.where(rb > z * s, np.nan, b), np.where(rh > z * s, np.nan, h)


def holm_v(p):
    m = p.shape[-1]
    o = np.argsort(p, -1)
    ps = np.take_along_axis(p, o, -1) * (m - np.arange(m))
    ps = np.minimum(np.maximum.accumulate(ps, -1), 1.0)
    out = np.empty_like(p)
    np.put_along_axis(out, o, ps, -1)
    return out


def decide_v(d, se, df, se_w, df_w):
    """Vectorised reference.decide. Arrays (reps, L). se NaN / df 0 = not estimable."""
    ok = (df > 0) & np.isfinite(se)
    dfs = np.where(ok, df, 1.0)
    ses = np.where(ok, se, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(ok, np.where(ses > 0, T.cdf(d / ses, dfs), (d >= 0).astype(float)), 1.0)
        okw = (df_w > 0) & (se_w > 0)
        pg = np.where(okw, T.cdf((d - math.log(1 - GUARD)) / np.where(okw, se_w, 1.0),
                                 np.where(okw, df_w, 1.0)), 1.0)
    ph, pgh = holm_v(p), holm_v(pg)
    tq = T.ppf(1 - ALPHA / L, dfs)
    lower = np.where(ok, np.exp(d - tq * ses), 0.0)
    mdd = np.where(ok, 1 - np.exp(-(tq + T.ppf(POWER, dfs)) * ses), np.inf)
    reg_lv = ((ph < ALPHA) & (np.exp(d) <= 1 - ME)) | (pgh < ALPHA_G)
    guard_only = (pgh < ALPHA_G) & ~((ph < ALPHA) & (np.exp(d) <= 1 - ME))
    nor_lv = ~reg_lv & (lower > 1 - ME)
    reg = reg_lv.any(-1)
    nor = ~reg & nor_lv.all(-1)
    return dict(reg=reg, nor=nor, inc=~reg & ~nor, guard_only=(guard_only.any(-1) & reg),
                mdd=mdd, p=p, ph=ph, pgh=pgh, lower=lower)


# ------------------------------------------------------------------ data generation

def ar1(rng, reps, n, rho):
    z = rng.standard_normal((reps, n))
    e = np.empty_like(z)
    e[:, 0] = z[:, 0]
    c = math.sqrt(1 - rho * rho)
    for i in range(1, n):
        e[:, i] = rho * e[:, i - 1] + c * z[:, i]
    return e * SW


def relative_data(rng, reps, n, sb, rho, drop, blocks, contam=0.0, contam_head_only=False,
                  drift=0.0):
    """y[rep, arm(0=base,1=head), level, round]; rounds = n; ABBA over rounds,
    round r = levels in a seeded order, arm order AB if r even else BA.
    blocks: None (no restart: one shared session) or number of restart blocks (n % blocks == 0).
    drift: linear change of ln tok/s over the whole job (both arms)."""
    Tn = n * 2 * L
    perm = np.argsort(rng.random((reps, n, L)), -1)       # order of levels in round r
    pos = np.argsort(perm, -1)                            # position of level l in round r
    r = np.arange(n)
    half = (np.arange(2)[:, None] ^ (r % 2)[None, :])     # (arm, round)
    t = r[None, None, None, :] * 2 * L + half[None, :, None, :] * L + \
        np.transpose(pos, (0, 2, 1))[:, None, :, :]       # (reps, arm, L, n)
    e = ar1(rng, reps, Tn, rho)
    y = e[np.arange(reps)[:, None, None, None], t]
    if blocks is None:
        y = y + sb * rng.standard_normal((reps, 1, L, 1))
    else:
        m = n // blocks
        a = sb * rng.standard_normal((reps, 2, L, blocks))
        y = y + np.repeat(a, m, -1)
    y[:, 1] += math.log(1 - drop)
    if drift:
        y = y + drift * t / (Tn - 1)
    if contam:
        hit = rng.random(y.shape) < contam
        if contam_head_only:
            hit[:, 0] = False
        y = y + SLOW * hit
    return y, r


def history_data(rng, reps, k, nb, nc, sb, rho, drop, contam=0.0):
    """sessions: list of arrays y[rep, level, trial]; last one is the candidate.
    Each session: rounds of all levels in a seeded order; AR(1) over its own time order."""
    out = []
    for s in range(k + 1):
        n = nc if s == k else nb
        perm = np.argsort(rng.random((reps, n, L)), -1)
        pos = np.transpose(np.argsort(perm, -1), (0, 2, 1))        # (reps, L, n)
        t = np.arange(n)[None, None, :] * L + pos
        e = ar1(rng, reps, n * L, rho)
        y = e[np.arange(reps)[:, None, None], t] + sb * rng.standard_normal((reps, L, 1))
        if s == k:
            y = y + math.log(1 - drop)
        if contam:
            y = y + SLOW * (rng.random(y.shape) < contam)
        out.append(y)
    return out


# ------------------------------------------------------------------ analyses

def analyse_relative(y, blocks, method):
    """method: welch | mad | yuen. Returns decide_v dict."""
    reps, _, _, n = y.shape
    if blocks is None:
        b, h = y[:, 0], y[:, 1]
        if method == "yuen":
            d, se, df = yuen_v(b, h)
        else:
            if method == "mad":
                b, h = outlier_nan_rel(b, h)
            d, se, df = welch_v(b, h)
            nb = np.sum(~np.isnan(b), -1)
            nh = np.sum(~np.isnan(h), -1)
            bad = (nb < 3) | (nh < 3)
            se = np.where(bad, np.nan, se)
            df = np.where(bad, 0.0, df)
        return decide_v(d, se, df, se, df)
    m = n // blocks
    yb = y.reshape(reps, 2, L, blocks, m)                     # cells (arm, block)
    cm = np.nanmean(yb, -1)                                   # (reps, 2, L, blocks)
    d, se, df = welch_v(cm[:, 0], cm[:, 1])
    # within: pooled over cells
    cnt = np.sum(~np.isnan(yb), -1)
    ss = np.nansum((yb - cm[..., None]) ** 2, -1)
    dfw = np.sum(cnt - 1, (1, 3))
    s2w = np.sum(ss, (1, 3)) / np.maximum(dfw, 1)
    ntot = np.sum(cnt, -1)                                     # (reps, 2, L)
    se_w = np.sqrt(s2w * (1 / ntot[:, 0] + 1 / ntot[:, 1]))
    se_w = np.where(dfw > 0, se_w, 0.0)
    return decide_v(d, se, df, se_w, dfw.astype(float))


def analyse_history(sessions, method="plain"):
    if method == "mad":
        # the rule pools the scale over all sessions of the level (equal sizes here)
        st = outlier_nan(np.stack(sessions, 2), len(sessions))   # (reps, L, S, n)
        sessions = [st[:, :, i] for i in range(st.shape[2])]
    base, cand = sessions[:-1], sessions[-1]
    k = len(base)
    means = np.stack([np.nanmean(s, -1) for s in base], -1)   # (reps, L, k)
    cnts = np.stack([np.sum(~np.isnan(s), -1) for s in sessions], -1)
    ssq = sum(np.nansum((s - np.nanmean(s, -1, keepdims=True)) ** 2, -1) for s in sessions)
    dfw = np.sum(cnts - 1, -1)
    s2w = ssq / dfw
    nc = cnts[..., -1]
    nbt = np.sum(cnts[..., :-1], -1)
    nh = k / np.sum(1 / cnts[..., :-1], -1)
    d = np.nanmean(cand, -1) - means.mean(-1)
    se_w = np.sqrt(s2w * (1 / nc + 1 / nbt))
    if k >= 2:
        s2m = means.var(-1, ddof=1)
        a = s2m * (1 + 1 / k)
        c = np.maximum(0.0, 1 / nc - 1 / nh) * s2w
        V = a + c
        df = V ** 2 / (a ** 2 / (k - 1) + c ** 2 / dfw)
        se = np.sqrt(V)
        sb2 = s2m - s2w / nh
    else:
        se = np.full(d.shape, np.nan)
        df = np.zeros(d.shape)
        sb2 = np.full(d.shape, np.nan)
    out = decide_v(d, se, df, se_w, dfw.astype(float))
    out["sb2"] = sb2
    return out


def drift_v(y, rounds_per_session, sessions_per_job):
    """y: (reps, cells..., R) residual-ready array whose last axis is the round index (each
    round holds exactly one trial per cell). Residuals from cell means within session."""
    reps = y.shape[0]
    R = y.shape[-1]
    yy = y.reshape(reps, -1, sessions_per_job, rounds_per_session)
    e = yy - yy.mean(-1, keepdims=True)
    eb = e.mean(1)                                           # (reps, S, Rs)
    r = np.arange(rounds_per_session) - (rounds_per_session - 1) / 2
    sxx = sessions_per_job * np.sum(r ** 2)
    b = np.sum(eb * r, (-1, -2)) / sxx
    ebc = eb - eb.mean(-1, keepdims=True)
    rss = np.sum((ebc - b[:, None, None] * r) ** 2, (-1, -2))
    df = R - sessions_per_job - 1
    tt = b / np.sqrt(rss / df / sxx)
    p = 2 * T.cdf(-np.abs(tt), df)
    size = b * (rounds_per_session - 1)
    return p, size, df


# ------------------------------------------------------------------ oracle

def oracle_power(drop, se):
    """Known-variance z-test, Holm over L levels, all levels dropped: P(min p < alpha/L)."""
    if not np.isfinite(se) or se <= 0:
        return float("nan")
    z = -math.log(1 - drop) / se - norm.ppf(1 - ALPHA / L)
    return 1 - (1 - norm.cdf(z)) ** L


def mc(p, n):
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


# ------------------------------------------------------------------ cross-check

def check_against_reference(n_cases=40):
    """The vectorised code must give the reference's answers (p, Holm p, outcome)."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for case in range(n_cases):
        blocks = [None, 3, 2][case % 3]
        y, _ = relative_data(rng, 1, 6, 0.05, 0.5, [0, 0.06][case % 2], blocks, contam=0.2)
        o = analyse_relative(y, blocks, "mad")
        m = 6 // blocks if blocks else 6
        lab = [None] * 6 if blocks is None else [j // m for j in range(6)]
        lv = [ref.relative_level(y[0, 0, l], y[0, 1, l],
                                 None if blocks is None else lab, None if blocks is None else lab)
              for l in range(L)]
        v = ref.decide(lv)
        assert v == ("REGRESSION" if o["reg"][0] else "NO_REGRESSION" if o["nor"][0] else "INCONCLUSIVE"), case
        for l in range(L):
            worst = max(worst, abs(lv[l].p - o["p"][0, l]), abs(lv[l].p_holm - o["ph"][0, l]))
        k = [1, 2, 4][case % 3]
        s = history_data(rng, 1, k, 5, 5, 0.05, 0.5, [0, 0.3][case % 2], contam=0.2)
        o = analyse_history(s)
        lv = [ref.history_level([s[i][0, l] for i in range(k)], s[k][0, l]) for l in range(L)]
        v = ref.decide(lv)
        assert v == ("REGRESSION" if o["reg"][0] else "NO_REGRESSION" if o["nor"][0] else "INCONCLUSIVE"), case
        for l in range(L):
            worst = max(worst, abs(lv[l].p - o["p"][0, l]), abs(lv[l].p_holm - o["ph"][0, l]),
                        abs(lv[l].p_guard_holm - o["pgh"][0, l]))
    assert worst < 1e-9, worst
    print(f"vectorised == reference on {2 * n_cases} cases (max |dp| {worst:.1e})")


# ------------------------------------------------------------------ main

def main():
    t0 = time.time()
    check_against_reference()
    rng = np.random.default_rng(20240614)
    res = {"reps": REPS, "relative": [], "history": [], "robust": [], "drift": []}
    effects = [0.0, 0.06, 0.10]

    # --- relative mode: designs x sigma_b x AR x effect, chosen method (mad)
    designs = [("no restart, 6v6", None, 6), ("restart 3 blocks x 2", 3, 6),
               ("restart 6 blocks x 1", 6, 6), ("restart 2 blocks x 3", 2, 6)]
    for name, blocks, n in designs:
        for sb in (0.0, 0.03, 0.08):
            for rho in (0.0, 0.5):
                for drop in effects:
                    y, _ = relative_data(rng, REPS, n, sb, rho, drop, blocks)
                    o = analyse_relative(y, blocks, "mad")
                    if blocks is None:
                        se_o = SW * math.sqrt(2 / n)
                    else:
                        se_o = math.sqrt(2 * (sb ** 2 + SW ** 2 / (n // blocks)) / blocks)
                    res["relative"].append(dict(
                        design=name, sb=sb, rho=rho, drop=drop, reg=o["reg"].mean(),
                        nor=o["nor"].mean(), inc=o["inc"].mean(),
                        guard_only=o["guard_only"].mean(),
                        mdd_median=float(np.median(o["mdd"][:, 0])),
                        oracle=oracle_power(drop, se_o) if drop else None))
    print(f"relative done {time.time() - t0:.0f}s", flush=True)

    # --- robust comparison (relative, no restart, 6v6, sigma_b 8% shared)
    for contam, head_only in ((0.0, False), (0.2, False), (0.2, True)):
        for rho in (0.0, 0.5):
            for drop in effects:
                y, _ = relative_data(rng, REPS, 6, 0.08, rho, drop, None, contam, head_only)
                row = dict(contam=contam, head_only=head_only, rho=rho, drop=drop)
                for meth in ("welch", "yuen", "mad"):
                    o = analyse_relative(y, None, meth)
                    row[meth] = dict(reg=o["reg"].mean(), nor=o["nor"].mean(), inc=o["inc"].mean())
                for z in (3.5, 5.0):
                    bb, hh = outlier_nan_rel(y[:, 0], y[:, 1], z)
                    d, se, df = welch_v(bb, hh)
                    bad = (np.sum(~np.isnan(bb), -1) < 3) | (np.sum(~np.isnan(hh), -1) < 3)
                    o = decide_v(d, np.where(bad, np.nan, se), np.where(bad, 0.0, df), se, df)
                    row[f"near{z}"] = dict(reg=o["reg"].mean(), nor=o["nor"].mean(), inc=o["inc"].mean())
                    if drop == 0 and contam == 0:
                        row[f"near{z}_dropped_clean"] = float(np.isnan(np.stack([bb, hh])).mean())
                for z, pc_ in ((3.5, False), (4.0, False), (5.0, True)):
                    b, h = y[:, 0], y[:, 1]
                    yy = outlier_nan(np.stack([b, h], 2), 2, z=z, per_cell=pc_)
                    bb, hh = yy[:, :, 0], yy[:, :, 1]
                    d, se, df = welch_v(bb, hh)
                    bad = (np.sum(~np.isnan(bb), -1) < 3) | (np.sum(~np.isnan(hh), -1) < 3)
                    se = np.where(bad, np.nan, se)
                    df = np.where(bad, 0.0, df)
                    o = decide_v(d, se, df, se, df)
                    key = "madcell5.0" if pc_ else f"mad{z}"
                    row[key] = dict(reg=o["reg"].mean(), nor=o["nor"].mean(), inc=o["inc"].mean())
                if drop == 0 and contam == 0:
                    yy = outlier_nan(np.stack([y[:, 0], y[:, 1]], 2), 2)
                    row["trials_dropped_clean"] = float(np.isnan(yy).mean())
                res["robust"].append(row)
    print(f"robust done {time.time() - t0:.0f}s", flush=True)

    # --- history mode
    nb = nc = 5
    for k in (1, 2, 4, 10):
        for sb in (0.0, 0.03, 0.08):
            for rho in (0.0, 0.5):
                for drop in effects:
                    reps = REPS
                    s = history_data(rng, reps, k, nb, nc, sb, rho, drop)
                    o = analyse_history(s)
                    se_o = math.sqrt(sb ** 2 * (1 + 1 / k) + SW ** 2 * (1 / nc + 1 / (k * nb)))
                    row = dict(k=k, sb=sb, rho=rho, drop=drop, reg=o["reg"].mean(),
                               nor=o["nor"].mean(), inc=o["inc"].mean(),
                               guard_only=o["guard_only"].mean(),
                               mdd_median=float(np.median(o["mdd"][:, 0])),
                               oracle=oracle_power(drop, se_o) if drop else None)
                    if k >= 2 and drop == 0:
                        row["sb2_mean_est"] = float(np.nanmean(o["sb2"]))
                        row["sb2_true"] = sb ** 2
                    res["history"].append(row)
    # history with outliers, k=4, sigma_b 3%
    for drop in effects:
        s = history_data(rng, REPS, 4, nb, nc, 0.03, 0.5, drop, contam=0.2)
        for meth in ("plain",):
            o = analyse_history(s, meth)
            res["history"].append(dict(k=4, sb=0.03, rho=0.5, drop=drop, contam=0.2, method=meth,
                                       reg=o["reg"].mean(), nor=o["nor"].mean(), inc=o["inc"].mean()))
    print(f"history done {time.time() - t0:.0f}s", flush=True)

    # --- drift check
    for rho in (0.0, 0.5):
        for drift in (0.0, 0.03, 0.10):
            y, _ = relative_data(rng, REPS, 6, 0.08, rho, 0.0, None, drift=-drift)
            p, size, df = drift_v(y.reshape(REPS, 2 * L, 6), 6, 1)
            s = history_data(rng, REPS, 0, 5, 5, 0.08, rho, 0.0)[0]
            if drift:
                s = s + (-drift) * np.arange(5) / 4
            p2, size2, df2 = drift_v(s, 5, 1)
            yr, _ = relative_data(rng, REPS, 6, 0.08, rho, 0.0, 3, drift=-drift)
            # restarts: 3 blocks of 2 rounds -> sessions = blocks; cells (arm, level)
            p3, size3, df3 = drift_v(yr.reshape(REPS, 2 * L, 6), 2, 3)
            for lab, pp, sz, dd in (("relative 6 rounds", p, size, df),
                                    ("history candidate 5 rounds", p2, size2, df2),
                                    ("relative restarts 3x2 rounds", p3, size3, df3)):
                res["drift"].append(dict(design=lab, rho=rho, drift=drift, df=int(dd),
                                         flag_p=float((pp < 0.01).mean()),
                                         flag_p_size=float(((pp < 0.01) & (np.abs(sz) >= 0.01)).mean()),
                                         flag_p005_size=float(((pp < 0.005) & (np.abs(sz) >= 0.01)).mean())))
    print(f"drift done {time.time() - t0:.0f}s", flush=True)

    json.dump(res, open("calib_results.json", "w"), indent=1, default=float)
    print(f"total {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()

"""Writes vectors.json: deterministic cases (literal tok/s inputs -> reference outputs)."""
import json, math
import numpy as np
import reference as ref

def sig(x, n=6):
    if x is None or isinstance(x, str): return x
    if isinstance(x, bool): return x
    if isinstance(x, (int,)) : return x
    if not math.isfinite(x): return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return float(f"{x:.{n}g}")

KEYS = ["mode", "ratio", "d", "se", "df", "p", "p_holm", "p_guard", "p_guard_holm", "lower", "upper",
        "pass_lower", "pass_upper",
        "mdd", "sigma_w", "sigma_b", "sigma_b2_raw", "sigma_b_df", "se_w", "df_w",
        "n_base", "n_head", "dropped_base", "dropped_head", "outcome"]

def out(levels, verdict):
    return {"verdict": verdict,
            "levels": [{k: sig(getattr(lv, k)) for k in KEYS} for lv in levels]}

def gen(seed, n, mu, cv=0.02, drop=0.0, sb=0.0):
    r = np.random.default_rng(seed)
    return [round(float(mu * (1 - drop) * math.exp(sb * r.standard_normal()) * math.exp(cv * z)), 1)
            for z in r.standard_normal(n)]

cases = []
def rel(name, desc, base, head, bsess=None, hsess=None):
    lv = [ref.relative_level([math.log(v) for v in b], [math.log(v) for v in h],
                             bsess[i] if bsess else None, hsess[i] if hsess else None)
          for i, (b, h) in enumerate(zip(base, head))]
    v = ref.decide(lv)
    inp = {"base_tok_s": base, "head_tok_s": head}
    if bsess: inp["base_session"], inp["head_session"] = bsess, hsess
    cases.append({"name": name, "kind": "relative", "description": desc, "input": inp, "expected": out(lv, v)})
    return v, lv

def hist(name, desc, base_sessions, cand):
    lv = [ref.history_level([[math.log(v) for v in s] for s in bs], [math.log(v) for v in c])
          for bs, c in zip(base_sessions, cand)]
    v = ref.decide(lv)
    cases.append({"name": name, "kind": "history", "description": desc,
                  "input": {"baseline_sessions_tok_s": base_sessions, "candidate_tok_s": cand},
                  "expected": out(lv, v)})
    return v, lv

mus = [215.0, 640.0, 1510.0]
# 1 relative A/A, clean, 6v6, 3 levels
print(rel("relative_aa_clean", "one session, 6 v 6, no change: NO_REGRESSION at every level (the 95% one-sided bound above 0.95; under the old Holm-level rule against 0.97 two levels were INCONCLUSIVE)",
          [gen(10 + i, 6, m) for i, m in enumerate(mus)], [gen(20 + i, 6, m) for i, m in enumerate(mus)])[0])
# 2 relative 6% drop
print(rel("relative_drop6", "one session, 6 v 6, head 6% slower at every level",
          [gen(30 + i, 6, m) for i, m in enumerate(mus)], [gen(40 + i, 6, m, drop=0.06) for i, m in enumerate(mus)])[0])
# 3 outlier trial: slow mode in base at level 0 and in head at level 1
b = [gen(50 + i, 6, m) for i, m in enumerate(mus)]; h = [gen(60 + i, 6, m, drop=0.06) for i, m in enumerate(mus)]
b[0][2] = 146.0; h[1][4] = round(h[1][4] * 146 / 215, 1)
print(rel("relative_outlier", "one session, 6 v 6, 6% drop; one slow-mode trial (146 vs ~215 tok/s) in base at level 0 and one in head at level 1: both dropped by the nearest-median rule", b, h)[0])
# 4 relative with restarts, 3 blocks x 2
bs = [[0, 0, 1, 1, 2, 2]] * 3
def blocky(seed, m, drop):
    r = np.random.default_rng(seed); out_ = []
    for blk in range(3):
        off = math.exp(0.05 * r.standard_normal())
        out_ += [round(m * (1 - drop) * off * math.exp(0.02 * r.standard_normal()), 1) for _ in range(2)]
    return out_
print(rel("relative_restarts_inconclusive", "servers restarted between 3 ABBA blocks (2 trials per arm per block), sigma_b ~5%, head 4% slower: block means carry the restarts, INCONCLUSIVE (level 1's bound clears 0.95: NO_REGRESSION there)",
          [blocky(70 + i, m, 0) for i, m in enumerate(mus)], [blocky(80 + i, m, 0.04) for i, m in enumerate(mus)], bs, bs)[0])
# 5 Holm case: search seeds
for seed in range(1000):
    base = [gen(seed * 7 + i, 5, m, cv=0.03) for i, m in enumerate(mus)]
    head = [gen(seed * 7 + 100 + i, 5, m, cv=0.03, drop=0.05) for i, m in enumerate(mus)]
    lv = [ref.relative_level([math.log(v) for v in bb], [math.log(v) for v in hh]) for bb, hh in zip(base, head)]
    ref.decide(lv)
    if any(l.p < 0.008 for l in lv) and all(l.p_holm >= 0.008 for l in lv) and all(l.ratio <= 0.97 for l in lv):
        print("holm seed", seed, [l.p for l in lv], [l.p_holm for l in lv])
        print(rel("relative_holm", "5 v 5, CV 3%, 5% drop: raw p < 0.008 at two levels but no Holm p < 0.008 -> not a regression", base, head)[0])
        break
# history
def sessions(seed, k, n, m, sb):
    r = np.random.default_rng(seed)
    return [[round(m * math.exp(sb * a) * math.exp(0.02 * z), 1) for z in r.standard_normal(n)]
            for a in r.standard_normal(k)]
mus2 = [215.0, 1510.0]
print(hist("history_k1_inconclusive", "k = 1 baseline session, 5 v 5, candidate 8% slower: sigma_b unknown -> INCONCLUSIVE (no guard trip)",
           [sessions(90 + i, 1, 5, m, 0.03) for i, m in enumerate(mus2)], [gen(95 + i, 5, m, drop=0.08) for i, m in enumerate(mus2)])[0])
print(hist("history_k1_guard", "k = 1, candidate 40% slower at level 1: the gross-regression guard fails it",
           [sessions(100 + i, 1, 5, m, 0.03) for i, m in enumerate(mus2)], [gen(105, 5, mus2[0]), gen(106, 5, mus2[1], drop=0.40)])[0])
print(hist("history_k2", "k = 2 sessions (sigma_b ~3%), candidate 10% slower: t with 1 df -> INCONCLUSIVE",
           [sessions(210 + i, 2, 5, m, 0.03) for i, m in enumerate(mus2)], [gen(215 + i, 5, m, drop=0.10) for i, m in enumerate(mus2)])[0])
print(hist("history_k4_regression", "k = 4 sessions (sigma_b ~1%), candidate 15% slower at both levels",
           [sessions(120 + i, 4, 5, m, 0.01) for i, m in enumerate(mus2)], [gen(125 + i, 5, m, drop=0.15) for i, m in enumerate(mus2)])[0])
print(hist("history_k4_unbalanced", "k = 4 sessions with 5,5,4,6 trials, candidate with 3 trials (Satterthwaite df, within term added), no change: NO_REGRESSION at both levels (level 1 was INCONCLUSIVE under the old Holm-level rule)",
           [[s[0][:5], s[1][:5], s[2][:4], s[3][:6]] for s in [sessions(130 + i, 4, 6, m, 0.01) for i, m in enumerate(mus2)]],
           [gen(135 + i, 3, m) for i, m in enumerate(mus2)])[0])
print(hist("history_k10_noreg", "k = 10 sessions (sigma_b ~0.5%), candidate unchanged: NO_REGRESSION (95% bounds above 0.95; the old Holm-level bounds 0.94, 0.96 < 0.97 said INCONCLUSIVE)",
           [sessions(140 + i, 10, 5, m, 0.005) for i, m in enumerate(mus2)], [gen(145 + i, 5, m) for i, m in enumerate(mus2)])[0])
# latency gate: TTFT p99 per trial (seconds), head 40% slower
bl = [[0.310, 0.305, 0.322, 0.298, 0.315, 0.309], [0.820, 0.835, 0.811, 0.829, 0.842, 0.818]]
hl = [[0.432, 0.441, 0.425, 0.450, 0.437, 0.429], [0.830, 0.825, 0.846, 0.812, 0.838, 0.821]]
lv = [ref.relative_level(ref.latency_to_gate_scale(b_), ref.latency_to_gate_scale(h_)) for b_, h_ in zip(bl, hl)]
v = ref.decide(lv, min_effect=1 - 1 / 1.10)
cases.append({"name": "latency_ttft_p99", "kind": "relative-latency",
              "description": "TTFT p99 per trial (s), higher is worse: y = -ln(latency), min effect for a 10% latency rise = 1 - 1/1.10; level 0 rose 40%",
              "input": {"base_latency_s": bl, "head_latency_s": hl, "min_effect": 1 - 1 / 1.10},
              "expected": out(lv, v)})
print(v)
# drift case: one session, 3 levels x 2 arms, 6 rounds, falling 1.5% per round
vals, cells, rounds, sess = [], [], [], []
r = np.random.default_rng(150)
for rd in range(6):
    for li, m in enumerate(mus):
        for arm in (0, 1):
            vals.append(round(m * math.exp(-0.015 * rd + 0.02 * r.standard_normal()), 1))
            cells.append(f"{li}/{arm}/0"); rounds.append(rd); sess.append(0)
dc = ref.drift_check(cells, [math.log(v) for v in vals], rounds, sess, alpha=0.01, min_size=0.01)
cases.append({"name": "drift_falling", "kind": "drift", "description": "one session, 6 rounds, 3 levels x 2 arms, falling ~1.5% per round",
              "input": {"tok_s": vals, "cell": cells, "round": rounds, "session": sess, "alpha": 0.01, "min_size": 0.01},
              "expected": {k: sig(v_) if not isinstance(v_, bool) else v_ for k, v_ in dc.items()}})
print(dc)
cases.append({"name": "holm_only", "kind": "holm", "input": {"p": [0.004, 0.0021, 0.03, 0.0005, 0.2]},
              "expected": {"p_holm": [sig(x) for x in ref.holm([0.004, 0.0021, 0.03, 0.0005, 0.2])]}})
doc = {"about": "Reference outputs of /work/gate-study/reference.py. y = ln(tok/s) (latency: y = -ln(s)). "
       "family alpha 0.01: main test Holm at 0.008, guard Holm at 0.001 (0.001 kept for the guard's session-effect leakage); min_effect 0.03 unless given; guard 0.25; "
       "power 0.8; outlier z = 5 (relative one-session only). 'inf' = infinite. Values to 6 significant digits; "
       "t quantiles/cdf from scipy.stats.t (statrs StudentsT gives the same to ~1e-10).",
       "settings": {"alpha": ref.ALPHA, "alpha_main": ref.ALPHA_MAIN, "alpha_guard": ref.ALPHA_GUARD, "min_effect": ref.MIN_EFFECT, "guard": ref.GUARD,
                    "power": ref.POWER, "outlier_z": ref.OUTLIER_Z, "mad_k": ref.MAD_K},
       "cases": cases}
json.dump(doc, open("vectors.json", "w"), indent=1)
print(len(cases), "cases")

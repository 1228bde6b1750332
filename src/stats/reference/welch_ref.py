"""Reference values for src/stats/welch.rs tests. Run: python3 welch_ref.py"""
import numpy as np
from scipy import stats

b = np.array([1510.2, 1498.7, 1523.9, 1505.1, 1489.4])
c = np.array([1461.0, 1470.3, 1449.8, 1480.2, 1455.5, 1466.1])

lb, lc = np.log(b), np.log(c)
# Plain Welch test on logs, via SciPy.
r = stats.ttest_ind(lc, lb, equal_var=False, alternative="less")
r2 = stats.ttest_ind(lc, lb, equal_var=False, alternative="two-sided")
ci = r2.confidence_interval(confidence_level=0.95)
rf = stats.ttest_ind(lc, lb, equal_var=False, alternative="greater")
print("// scipy.stats.ttest_ind(log(c), log(b), equal_var=False, alternative='less')")
print(f"const REF_T: f64 = {float(r.statistic)!r};")
print(f"const REF_DF: f64 = {float(r.df)!r};")
print(f"const REF_P_SLOWER: f64 = {float(r.pvalue)!r};")
print(f"const REF_P_FASTER: f64 = {float(rf.pvalue)!r};")
print("// exp of ttest_ind(..., alternative='two-sided').confidence_interval(0.95)")
print(f"const REF_CI: (f64, f64) = ({float(np.exp(ci.low))!r}, {float(np.exp(ci.high))!r});")
print(f"const REF_RATIO: f64 = {float(stats.gmean(c) / stats.gmean(b))!r};")

# With an extra variance on the baseline mean (by hand; no SciPy function does this).
extra = 1.5e-5
vb = np.var(lb, ddof=1) / len(lb) + extra
vc = np.var(lc, ddof=1) / len(lc)
df = (vb + vc) ** 2 / (vb**2 / (len(lb) - 1) + vc**2 / (len(lc) - 1))
d = lc.mean() - lb.mean()
se = np.sqrt(vb + vc)
t = d / se
q = stats.t.ppf(0.975, df)
print("// by hand: vb = var(lb,ddof=1)/nb + 1.5e-5; Welch df; scipy.stats.t.cdf(t, df), t.ppf(0.975, df)")
print(f"const REF_X_T: f64 = {float(t)!r};")
print(f"const REF_X_DF: f64 = {float(df)!r};")
print(f"const REF_X_P_SLOWER: f64 = {float(stats.t.cdf(t, df))!r};")
print(f"const REF_X_CI: (f64, f64) = ({float(np.exp(d - q*se))!r}, {float(np.exp(d + q*se))!r});")

# Holm via statsmodels (pip install statsmodels).
from statsmodels.stats.multitest import multipletests
for name, p in [("REF_HOLM", [0.01, 0.04, 0.03, 0.005, 0.5]), ("REF_HOLM2", [0.2, 0.2, 0.001, 0.9])]:
    adj = multipletests(p, method="holm")[1]
    print(f"// statsmodels.stats.multitest.multipletests({p}, method='holm')[1]")
    print(f"const {name}: [f64; {len(p)}] = [{', '.join(repr(float(a)) for a in adj)}];")

# Min detectable drop: delta = (t.ppf(1-alpha, df) + t.ppf(power, df)) * se on the log scale.
def mdd(cvb, cvc, nb, nc, alpha, power):
    vb = np.log1p(cvb**2) / nb
    vc = np.log1p(cvc**2) / nc
    df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
    delta = (stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df)) * np.sqrt(vb + vc)
    return 1 - np.exp(-delta)
cases = [(0.02, 0.02, 5, 5, 0.002, 0.8), (0.05, 0.03, 8, 4, 0.01, 0.9), (0.01, 0.015, 3, 10, 0.05, 0.5)]
print("// 1 - exp(-(scipy.stats.t.ppf(1-alpha, df) + scipy.stats.t.ppf(power, df)) * se), se/df from sqrt(log1p(cv^2))")
print("const REF_MDD: [(f64, f64, usize, usize, f64, f64, f64); 3] = [")
for cs in cases:
    print(f"    ({cs[0]}, {cs[1]}, {cs[2]}, {cs[3]}, {cs[4]}, {cs[5]}, {float(mdd(*cs))!r}),")
print("];")

"""Reference values for src/stats/sessions.rs tests. Run: python3 sessions_ref.py"""
import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

unbalanced = [[1510.0, 1498.0, 1522.0, 1507.0], [1470.0, 1481.0, 1466.0],
              [1533.0, 1540.0, 1528.0, 1536.0, 1531.0]]
balanced = [[1510.0, 1498.0, 1522.0], [1470.0, 1481.0, 1466.0],
            [1533.0, 1540.0, 1528.0], [1502.0, 1511.0, 1495.0]]
same_means = [[100.0, 102.0, 98.0], [99.0, 101.0, 100.0]]


def anova(sessions):
    y = [np.log(np.array(s)) for s in sessions]
    k = len(y)
    ni = np.array([len(s) for s in y], dtype=float)
    n = ni.sum()
    grand = np.concatenate(y).mean()
    means = np.array([s.mean() for s in y])
    msb = (ni * (means - grand) ** 2).sum() / (k - 1)
    msw = sum(((s - s.mean()) ** 2).sum() for s in y) / (n - k)
    n0 = (n - (ni**2).sum() / n) / (k - 1)
    sb2 = max(0.0, (msb - msw) / n0)
    var_mean = sb2 * (ni**2).sum() / n**2 + msw / n
    return grand, msw, sb2, var_mean


for name, s in [("UNBAL", unbalanced), ("BAL", balanced), ("SAME", same_means)]:
    g, w, b, vm = (float(v) for v in anova(s))
    print(f"// {name}: numpy one-way ANOVA moments on log(values)")
    print(f"const {name}_MEAN_LOG: f64 = {g!r};")
    print(f"const {name}_WITHIN: f64 = {w!r};")
    print(f"const {name}_BETWEEN: f64 = {b!r};")
    print(f"const {name}_VAR_OF_MEAN: f64 = {vm!r};")

# Independent cross-check on the balanced design: REML random-intercept model.
rows = [(i, np.log(v)) for i, s in enumerate(balanced) for v in s]
df = pd.DataFrame(rows, columns=["session", "y"])
fit = smf.mixedlm("y ~ 1", df, groups=df["session"]).fit(reml=True)
print("// statsmodels.formula.api.mixedlm('y ~ 1', df, groups=session).fit(reml=True).cov_re (balanced)")
print(f"const BAL_REML_BETWEEN: f64 = {float(fit.cov_re.iloc[0, 0])!r};")
print(f"const BAL_REML_WITHIN: f64 = {float(fit.scale)!r};")

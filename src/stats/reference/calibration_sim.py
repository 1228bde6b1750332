"""Independent simulation of the gate's calibration (src/stats/calibration.rs) with SciPy and
statsmodels: A/A false-failure rate and detection rate of a 6% drop at one of five levels.
Run: python3 calibration_sim.py"""
import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

rng = np.random.default_rng(3)
sd = np.sqrt(np.log1p(0.02**2))


def run(drop, sims=20000):
    fails = 0
    for _ in range(sims):
        b = rng.normal(0, sd, (5, 5))
        c = rng.normal(0, sd, (5, 5))
        c[2] += np.log(1 - drop)
        p = stats.ttest_ind(c, b, axis=1, equal_var=False, alternative="less").pvalue
        adj = multipletests(p, method="holm")[1]
        ratio = np.exp(c.mean(axis=1) - b.mean(axis=1))
        f = (adj < 0.01) & (1 - ratio >= 0.03)
        fails += f.any() if drop == 0 else f[2]
    return fails / sims


print("A/A false-failure rate:", run(0.0))
print("6% drop detection rate:", run(0.06))

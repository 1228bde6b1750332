"""Independent bootstrap reference for src/stats/usl.rs: resample trials within each level,
refit with scipy.optimize.curve_fit (relative weights, bounds), throughput at N = 48.
Different RNG from the Rust code, so only the distribution's summary is comparable.
Run: python3 usl_bootstrap_ref.py  (needs usl_ref.py beside it)"""
import numpy as np
exec(open(__file__.replace("usl_bootstrap_ref.py", "usl_ref.py")).read().split("# The seed curve")[0])

rng = np.random.default_rng(20261129)
ns = [1, 2, 4, 8, 16, 32, 64, 128]
pts = []
for n in ns:
    for _ in range(3):
        pts.append((n, float(usl(n, 95.0, 0.05, 2e-4) * np.exp(rng.normal(0, 0.03)))))
levels = {}
for n, x in pts:
    levels.setdefault(n, []).append(x)

boot = np.random.default_rng(1)
vals = []
for _ in range(1000):
    n_s, x_s = [], []
    for n, xs in levels.items():
        for x in boot.choice(xs, size=len(xs), replace=True):
            n_s.append(n)
            x_s.append(x)
    _, p = fit(n_s, x_s)
    vals.append(usl(48.0, *p))
vals = np.array(vals)
print("// 1000 resamples, numpy default_rng(1), curve_fit refits; throughput at N=48")
print(f"const BOOT_MEAN: f64 = {float(vals.mean())!r};")
print(f"const BOOT_SD: f64 = {float(vals.std(ddof=1))!r};")
print(f"const BOOT_P10_P90: (f64, f64) = ({float(np.percentile(vals, 10))!r}, {float(np.percentile(vals, 90))!r});")

"""Reference values for src/stats/summary.rs tests. Run: python3 summary_ref.py"""
import numpy as np
from scipy import stats

x = np.array([3.1, 0.4, 7.7, 2.2, 9.05, 5.5, 1.0])
qs = [0.0, 12.5, 25.0, 50.0, 73.0, 90.0, 99.0, 100.0]
print("const NP_PCT: [f64; 8] = [%s];" % ", ".join(repr(float(np.percentile(x, q))) for q in qs))
for name, q in [("REF_P50", 50), ("REF_P90", 90), ("REF_P99", 99)]:
    print(f"const {name}: f64 = {float(np.percentile(x, q))!r};")
print(f"const REF_MEAN: f64 = {float(np.mean(x))!r};")
print(f"const REF_SD: f64 = {float(np.std(x, ddof=1))!r};")
print(f"const REF_CV: f64 = {float(np.std(x, ddof=1) / np.mean(x))!r};")
print(f"const REF_GMEAN: f64 = {float(stats.gmean(x))!r};")

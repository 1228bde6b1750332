"""Print the markdown tables of results.md from calib_results.json."""
import json, math
r = json.load(open("calib_results.json"))
N = r["reps"]
pc = lambda x: "–" if x is None else f"{100*x:.1f}%" if x >= 0.02 or x == 0 else f"{100*x:.2f}%"
def mcerr(p): return 100*math.sqrt(max(p*(1-p),1e-12)/N)

print(f"## relative mode (reps {N}/cell); A/A = false REGRESSION; power = REGRESSION rate; inc = INCONCLUSIVE")
print("| design | sigma_b | AR | A/A fail | A/A no-reg / inc | 6%: power (oracle) | 6%: inc | 10%: power (oracle) | 10%: inc | median MDD |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = r["relative"]
for d in dict.fromkeys(x["design"] for x in rows):
    for sb in (0.0, 0.03, 0.08):
        for rho in (0.0, 0.5):
            c = {x["drop"]: x for x in rows if x["design"] == d and x["sb"] == sb and x["rho"] == rho}
            a, b6, b10 = c[0.0], c[0.06], c[0.1]
            print(f"| {d} | {sb:.0%} | {rho} | {pc(a['reg'])} | {pc(a['nor'])} / {pc(a['inc'])} | {pc(b6['reg'])} ({pc(b6['oracle'])}) | {pc(b6['inc'])} | {pc(b10['reg'])} ({pc(b10['oracle'])}) | {pc(b10['inc'])} | {pc(a['mdd_median'])} |")
print()
print("## history mode (n_b = n_c = 5 trials/level)")
print("| k | sigma_b | AR | A/A fail | A/A no-reg / inc | 6%: power (oracle) | 6%: inc | 10%: power (oracle) | 10%: inc | median MDD | mean est. sigma_b^2 / true |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = [x for x in r["history"] if "contam" not in x]
for k in (1, 2, 4, 10):
    for sb in (0.0, 0.03, 0.08):
        for rho in (0.0, 0.5):
            c = {x["drop"]: x for x in rows if x["k"] == k and x["sb"] == sb and x["rho"] == rho}
            a, b6, b10 = c[0.0], c[0.06], c[0.1]
            e = f"{a['sb2_mean_est']:.2e} / {a['sb2_true']:.2e}" if "sb2_mean_est" in a else "–"
            print(f"| {k} | {sb:.0%} | {rho} | {pc(a['reg'])} | {pc(a['nor'])} / {pc(a['inc'])} | {pc(b6['reg'])} ({pc(b6['oracle'])}) | {pc(b6['inc'])} | {pc(b10['reg'])} ({pc(b10['oracle'])}) | {pc(b10['inc'])} | {'∞' if math.isinf(a['mdd_median']) else pc(a['mdd_median'])} | {e} |")
print()
print("history, k=4, sigma_b 3%, AR 0.5, 20% slow-mode trials:")
for x in r["history"]:
    if "contam" in x:
        print(f"  {x['method']:5s} drop {x['drop']:.0%}: fail {pc(x['reg'])} no-reg {pc(x['nor'])} inc {pc(x['inc'])}")
print()
print("## robust options: relative, no restart, 6v6, sigma_b 8% shared (fail / no-reg / inc)")
print("| slow-mode trials | AR | drop | Welch ln | Yuen 20% | pooled MAD z=4 | pooled MAD z=3.5 | per-arm MAD z=5 (rejected) | nearest-median z=5 | nearest-median z=3.5 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for x in r["robust"]:
    cont = "none" if not x["contam"] else ("20% head only" if x["head_only"] else "20% both arms")
    f = lambda m: f"{pc(x[m]['reg'])} / {pc(x[m]['nor'])} / {pc(x[m]['inc'])}"
    print(f"| {cont} | {x['rho']} | {x['drop']:.0%} | {f('welch')} | {f('yuen')} | {f('mad4.0')} | {f('mad3.5')} | {f('madcell5.0')} | {f('near5.0')} | {f('near3.5')} |")
    if "near5.0_dropped_clean" in x: print(f"<!-- clean data, share of trials dropped: nearest-median z=5 {x['near5.0_dropped_clean']:.4%}, z=3.5 {x['near3.5_dropped_clean']:.4%} -->")
print()
print("## drift check: flag rate (two-sided p < 0.01; and with |size| >= 1%)")
print("| design | df | AR | true drift over run | flag p<0.01 | flag p<0.01 and abs(size)>=1% | flag p<0.005 and abs(size)>=1% |")
print("|---|---|---|---|---|---|---|")
for x in r["drift"]:
    print(f"| {x['design']} | {x['df']} | {x['rho']} | {x['drift']:.0%} | {pc(x['flag_p'])} | {pc(x['flag_p_size'])} | {pc(x['flag_p005_size'])} |")
print(f"\nMonte Carlo standard error: at 1% it is {mcerr(0.01):.2f} points, at 50% {mcerr(0.5):.2f} points.")

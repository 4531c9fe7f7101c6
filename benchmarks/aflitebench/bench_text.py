"""The text report of ``benchmarks/bench.py`` (:func:`format_report`): per solver its phase time and parts, the speed-up
over the scikit-learn reference and their agreement, and the complete filter's time and peak memory."""

from __future__ import annotations

from aflite.atomic import JSON


def _format_phase(p: JSON, indent: str = "  ") -> list[str]:
    lines = []
    for name, s in p["solvers"].items():
        th = ", ".join(f"{k} {v:.1f}" for k, v in s["thread_seconds"].items())
        extra = ""
        if "ratio_to_" + p["solver"] in s:
            ag = s["agreement_with_" + p["solver"]]
            extra = (f"; {s['ratio_to_' + p['solver']]:.2f}x the {p['solver']} solver's time, held-out predictions "
                     f"agree {ag['predictions']:.5f}, Pearson(p̃) {ag['pearson_p']:.4f}")
        lines.append(f"{indent}{name:<9} {s['seconds']:8.1f} s  (whitening {s['whitening_seconds']:.1f} s + phase "
                     f"{s['phase_seconds']:.1f} s; {s['lbfgs_steps_mean']:.1f} L-BFGS steps per model; "
                     f"thread-seconds: {th}){extra}")
    if "reference_seconds_scaled" in p:
        lines.append(f"{indent}reference {p['reference_seconds_scaled']:8.1f} s  (scikit-learn LogisticRegression, "
                     f"measured {p['reference_seconds_measured']:.1f} s on {p['reference_partitions']} of "
                     f"{p['n_partitions']} partitions and scaled; {p['reference_lbfgs_iterations_mean']} L-BFGS "
                     f"iterations per model)")
        lines.append(f"{indent}speed-up  {p['speedup']:8.1f} x  ({p['solver']} solver vs reference)")
        for name, s in p["solvers"].items():
            a = s["agreement_with_reference"]
            lines.append(f"{indent}{name} vs reference on {p['agreement_measured_on']}: predictions "
                         f"{a['predictions']:.4f}, Pearson(p̃) {a['pearson_p']:.4f}, top-{p['top_k']} overlap "
                         f"{a['top_k_overlap']:.4f}")
    return lines


def _format_complete(c: JSON, indent: str = "  ") -> list[str]:
    pr = c["parameters"]
    lines = [f"complete filter (m={pr['n_partitions']}, t={pr['train_size']}, k={pr['slice_size']}, "
             f"tau={pr['threshold']}, n={pr['target_size']}):"]
    main = next(iter(c["solvers"]))
    for name, r in c["solvers"].items():
        tot = r["phase_totals_seconds"]
        extra = ""
        if "ratio_to_" + main in r:
            extra = (f"; {r['ratio_to_' + main]:.2f}x the {main} solver's time, removed sets' Jaccard "
                     f"{r['agreement_with_' + main]['removed_jaccard']:.4f}")
        lines.append(f"{indent}{name:<9} wall {r['wall_seconds']:.1f} s, peak RSS {r['peak_rss_gib']:.2f} GiB, kept "
                     f"{r['size_after']} after {r['n_iterations']} phases ({r['stop_reason']}){extra}")
        lines.append(f"{indent}{'':<9} whitening {r['whitening_seconds']:.1f} s; phases: fit {tot['fit']:.1f} s "
                     f"(passes {tot['fit_passes']:.1f}, line search {tot['fit_line_search']:.1f}, L-BFGS "
                     f"{tot['fit_lbfgs']:.1f}, prediction {tot['fit_prediction']:.1f}, setup {tot['fit_setup']:.1f}), "
                     f"partitions+scoring {tot['partitions_and_scoring']:.1f} s, selection+bookkeeping "
                     f"{tot['selection_and_bookkeeping']:.1f} s")
    return lines


def format_report(res: JSON) -> str:
    p = res["phase"]
    lines = [f"data: {res['data']}", f"one filtering phase, m={p['n_partitions']}, t={p['train_size']}:"]
    lines += _format_phase(p)
    if "complete" in res:
        lines += _format_complete(res["complete"])
    if "real" in res:
        r = res["real"]
        lines.append(f"real features {r['features']} ({r['shape'][0]} x {r['shape'][1]}), Table 8 scaled by "
                     f"{r['parameters']['scale']:.4f}: one phase, m=64, t={r['phase']['train_size']}:")
        lines += _format_phase(r["phase"])
        if "complete" in r:
            lines += _format_complete(r["complete"])
    return "\n".join(lines)

"""The report of `sparse_comm.py` from its rows: the issue's goals (``goals.md``), the tables (``summary.md``)
and the plots (``bytes_vs_p_<graph>.png``, ``measured_steps.png``). Pure: reads the rows of ``model.csv``,
``measured.csv`` and ``auto.csv`` as `sparse_comm.read_csv` parses them, runs nothing.
"""

from __future__ import annotations

from pathlib import Path

METIS_ORDERS = ("metis", "metis-nnz", "metis-balanced")
SAR_KIB = {("amazon-computers", 2): 562, ("amazon-computers", 4): 867}
"""SAR's bytes per rank per epoch measured beside gridgnn's 1D (the issue's figures), KiB."""


def _paired(measured: list[dict], comm: str, partner) -> list[tuple[dict, dict]]:
    """(row, its partner) for every measured row whose ``comm`` is ``comm`` (ends with it, for ``+cache``):
    the partner is the run of the same graph, P, algorithm and order with ``partner(row)`` as its comm."""
    pairs = []
    for r in measured:
        if str(r["comm"]).endswith(comm) if comm.startswith("+") else r["comm"] == comm:
            other = _find(measured, graph=r["graph"], p=r["p"], algo=r["algo"], reorder=r["reorder"], comm=partner(r))
            if other is not None:
                pairs.append((r, other))
    return pairs


def _find(rows, **want):
    hits = [r for r in rows if all(r[k] == v for k, v in want.items())]
    return hits[0] if hits else None


def goals(model: list[dict], measured: list[dict], auto: list[dict] | None = None) -> list[str]:
    """The issue's goals as markdown lines: met / not met, with the figures."""
    lines = ["| goal | graph | figures | met |", "|---|---|---|---|"]

    def ratio_line(goal, graph, algo, p, limit, variant="sparse"):
        for order in METIS_ORDERS:
            sparse = _find(model, graph=graph, algo=algo, p=p, reorder=order, comm=variant)
            dense = _find(model, graph=graph, algo=algo, p=p, reorder="none", comm="dense")
            same = _find(model, graph=graph, algo=algo, p=p, reorder=order, comm="dense")
            if sparse is None or dense is None:
                continue
            r = sparse["max_bytes"] / dense["max_bytes"]
            rs = sparse["max_spmm_bytes"] / max(dense["max_spmm_bytes"], 1)
            memory = ""
            plain = _find(model, graph=graph, algo=algo, p=p, reorder=order, comm="sparse")
            if "+cache" in variant:  # what the cache costs: Â memory per rank against uncached sparse
                memory = (f"; graph memory {sparse['max_graph_bytes'] / 2**20:.1f} MiB per rank vs "
                          f"{plain['max_graph_bytes'] / 2**20:.1f} uncached")
            if "+rows" in variant:  # and the full feature rows: feature memory against column blocks
                memory += (f"; feature memory {sparse['max_feature_bytes'] / 2**20:.1f} MiB per rank vs "
                           f"{plain['max_feature_bytes'] / 2**20:.1f} in column blocks")
            if "+defer" in variant:  # the deferral helps dense just as much: the ratio against dense with it
                deferred = _find(model, graph=graph, algo=algo, p=p, reorder="none", comm="dense+defer")
                if deferred is not None:
                    ratio = sparse["max_bytes"] / deferred["max_bytes"]
                    memory += f"; vs dense natural order with deferred weight gather {ratio:.3f}"
            r_same = sparse["max_bytes"] / same["max_bytes"]
            lines.append(f"| {goal.format(order=order)} | {graph} | vs dense natural order: all phases {r:.3f} "
                         f"({sparse['max_bytes']:,} / {dense['max_bytes']:,} B), SpMM phases {rs:.3f}; vs dense "
                         f"{order} order {r_same:.3f}{memory} | {'met' if r <= limit else 'not met'} |")

    for graph in ("amazon-computers", "coauthor-physics"):
        ratio_line("sparse 1D {order} ≤ 1/10 dense, P=16", graph, "1d", 16, 0.1)
        ratio_line("sparse 2D {order} ≤ 1/3 dense, P=16", graph, "2d", 16, 1 / 3)
        ratio_line("sparse 3D {order} ≤ 1/3 dense, P=16", graph, "3d", 16, 1 / 3)
        ratio_line("sparse 2D {order} + cached panels ≤ 1/3 dense, P=16", graph, "2d", 16, 1 / 3, "sparse+cache")
        ratio_line("sparse 3D {order} + cached panels ≤ 1/3 dense, P=16", graph, "3d", 16, 1 / 3, "sparse+cache")
        ratio_line("sparse 2D {order} + cached panels + full feature rows ≤ 1/3 dense, P=16", graph, "2d", 16, 1 / 3,
                   "sparse+cache+rows")
        ratio_line("sparse 3D {order} + cached panels + full feature rows ≤ 1/3 dense, P=16", graph, "3d", 16, 1 / 3,
                   "sparse+cache+rows")
        for algo in ("2d", "3d"):
            ratio_line(f"sparse {algo.upper()} {{order}} + cached panels + full feature rows + deferred weight gather "
                       "≤ 1/3 dense, P=16", graph, algo, 16, 1 / 3, "sparse+cache+rows+defer")
    ratio_line("mesh: sparse 1D {order} ≤ 1/50 dense, P=64 (model)", "rgg-40k", "1d", 64, 1 / 50)
    for (graph, p), kib in SAR_KIB.items():
        best = min((r for r in model if r["graph"] == graph and r["p"] == p and r["comm"] == "sparse"),
                   key=lambda r: r["max_bytes"], default=None)
        if best is not None:
            mine = best["max_bytes"] / 1024
            lines.append(f"| fewer bytes than SAR ({kib} KiB/rank/epoch) | {graph} P={p} | {best['algo']} "
                         f"{best['reorder']} sparse {mine:.0f} KiB, nnz imbalance {best['nnz_imbalance']:.3f}, "
                         f"rows {best['row_imbalance']:.3f} | {'met' if mine < kib else 'not met'} |")
    for r in model:
        if r["reorder"] != "none" and r["comm"] == "sparse" and r["algo"] == "1d" and r["p"] == 16:
            ok = r["nnz_imbalance"] <= 1.10 and r["row_imbalance"] <= 1.10
            lines.append(f"| slowest rank's nnz and rows within 10 % of mean | {r['graph']} P=16 {r['reorder']} | "
                         f"nnz {r['nnz_imbalance']:.3f}, rows {r['row_imbalance']:.3f} | "
                         f"{'met' if ok else 'not met'} |")
    for r in auto or []:
        ok = r["auto_max_bytes"] <= r["dense_max_bytes"]
        lines.append(f"| random-order R-MAT: `--algo auto --comm auto` moves no more than the best dense | "
                     f"{r['graph']} P={r['p']} | auto {r['auto']} {r['auto_max_bytes']:,} B vs dense auto "
                     f"{r['dense_auto']} {r['dense_max_bytes']:,} B | {'met' if ok else 'not met'} |")
    priced = [r for r in model if r["comm"] == "sparse" and isinstance(r.get("setup_s"), float)]
    if priced:
        under = [r for r in priced if r["setup_s"] < r["epoch_s"]]
        worst = max(priced, key=lambda r: r["setup_s"] / r["epoch_s"])
        lines.append(f"| index exchange < one step (model, gpu-cluster profile) | every graph, order, algorithm, "
                     f"P = {min(r['p'] for r in priced)}-{max(r['p'] for r in priced)} | {len(under)} of "
                     f"{len(priced)} sparse configurations; the highest exchange/step ratio "
                     f"{worst['setup_s'] / worst['epoch_s']:.3f} ({worst['graph']} P={worst['p']} {worst['algo']} "
                     f"{worst['reorder']}) | {'met' if len(under) == len(priced) else 'not met'} |")
    for r in measured:
        dense = _find(measured, graph=r["graph"], p=r["p"], algo=r["algo"], reorder=r["reorder"], comm="dense")
        if r["comm"] == "sparse" and dense is not None:
            extra = r["setup_s"] - dense["setup_s"]  # the index exchange and the compaction of the blocks
            ok = r["index_exchange_s"] < r["step_s"]
            lines.append(f"| index exchange < one step | {r['graph']} P={r['p']} {r['algo']} {r['reorder']} | "
                         f"exchange {r['index_exchange_s']} s ({r['index_exchange_bytes']:,} B of ids), set-up "
                         f"{extra:+.4f} s vs dense, step {r['step_s']} s | "
                         f"{'met' if ok else 'not met'} |")
    return lines


VARIANTS = {("none", "dense"): ("dense, natural order", "-", "tab:gray"),
            ("none", "sparse"): ("sparse, natural order", "--", "tab:blue"),
            ("metis", "dense"): ("dense, METIS order", "-", "tab:orange"),
            ("metis", "sparse"): ("sparse, METIS order", "--", "tab:red"),
            ("metis-nnz", "sparse"): ("sparse, METIS-nnz order", ":", "tab:purple"),
            ("metis-balanced", "sparse"): ("sparse, METIS-balanced order", "-.", "tab:green"),
            ("metis-balanced", "sparse+cache"): ("sparse + cached panels, METIS-balanced", "-", "tab:olive"),
            ("metis-balanced", "sparse+cache+rows"): ("sparse + cached panels + feature rows, METIS-balanced", ":",
                                                      "tab:brown")}
"""The curves of each plot: (reorder, comm) -> label, line style, colour."""


def plots(out: Path, model: list[dict], measured: list[dict]) -> list[Path]:
    """``bytes_vs_p_<graph>.png`` (model: KiB per rank per step, max over ranks, against P, one panel per
    algorithm) and ``measured_steps.png`` (measured step seconds, dense vs sparse); needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[bench]')")
        return []
    written = []
    for graph in dict.fromkeys(r["graph"] for r in model):
        fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), sharey=True)
        for ax, algo in zip(axes, ("1d", "1.5d", "2d", "3d"), strict=True):
            for (reorder, comm), (label, style, colour) in VARIANTS.items():
                rows = sorted((r for r in model if r["graph"] == graph and r["algo"] == algo
                               and r["reorder"] == reorder and r["comm"] == comm), key=lambda r: r["p"])
                ax.plot([r["p"] for r in rows], [r["max_bytes"] / 1024 for r in rows], style, color=colour,
                        marker="o", markersize=3, label=label)
            ax.set(xscale="log", yscale="log", title=f"{graph} {algo}", xlabel="P")
        axes[0].set_ylabel("KiB per rank per step (max)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        written.append(out / f"bytes_vs_p_{graph}.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    pairs = _paired(measured, "dense", lambda r: "sparse")
    if pairs:
        fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(pairs)), 4.2))
        x = range(len(pairs))
        ax.bar([i - 0.2 for i in x], [d["step_s"] for d, _ in pairs], 0.4, label="dense", color="tab:gray")
        ax.bar([i + 0.2 for i in x], [sp["step_s"] for _, sp in pairs], 0.4, label="sparse", color="tab:red")
        ax.set_xticks(list(x), [f"{d['graph'][:8]} P={d['p']} {d['algo']} {d['reorder']}" for d, _ in pairs],
                      rotation=75, fontsize=6)
        ax.set(ylabel="median step seconds (measured)", title="gloo, forked workers, 1 thread each, 2-core machine")
        ax.legend()
        fig.tight_layout()
        written.append(out / "measured_steps.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


def summary(model: list[dict], measured: list[dict], p: int = 16) -> list[str]:
    """Markdown: KiB per rank per training step (max over ranks, model) at P = ``p`` for every graph and algorithm,
    dense and sparse in natural and METIS order, the METIS reordering's seconds and imbalance; then the measured
    step times."""
    lines = [f"Model, P = {p}: KiB received per rank per training step (max over ranks; all phases)", "",
             "| graph | algo | grid | dense | sparse | dense, METIS | sparse, METIS | sparse, METIS-nnz | "
             "sparse, METIS-balanced | sparse + cached panels, METIS-balanced | sparse + cached panels + full "
             "feature rows, METIS-balanced | the same + deferred weight gather | sparse METIS / dense | METIS s | "
             "nnz imbalance none → METIS → METIS-nnz → METIS-balanced |", "|---" * 15 + "|"]
    for graph in dict.fromkeys(r["graph"] for r in model):
        for algo in ("1d", "1.5d", "2d", "3d"):
            cell = {(r["reorder"], r["comm"]): r for r in model
                    if r["graph"] == graph and r["algo"] == algo and r["p"] == p}
            if ("none", "dense") not in cell:
                continue
            kib = {k: v["max_bytes"] / 1024 for k, v in cell.items()}
            base, metis = cell["none", "dense"], cell["metis", "sparse"]
            extra = [cell.get((order, "sparse")) for order in ("metis-nnz", "metis-balanced")]
            flagged = [cell.get(("metis-balanced", v)) for v in ("sparse+cache", "sparse+cache+rows",
                                                                      "sparse+cache+rows+defer")]
            extra_kib = " | ".join(f"{r['max_bytes'] / 1024:,.0f}" if r else "-" for r in [*extra, *flagged])
            extra_imbalance = " → ".join(str(r["nnz_imbalance"]) if r else "-" for r in extra)
            lines.append(f"| {graph} | {algo} | {base['grid']} | {kib['none', 'dense']:,.0f} | "
                         f"{kib['none', 'sparse']:,.0f} | {kib['metis', 'dense']:,.0f} | "
                         f"{kib['metis', 'sparse']:,.0f} | {extra_kib} | "
                         f"{kib['metis', 'sparse'] / kib['none', 'dense']:.3f} | {metis['reorder_s']} | "
                         f"{base['nnz_imbalance']} → {metis['nnz_imbalance']} → {extra_imbalance} |")
    if measured:
        lines += ["", "Measured (gloo, forked workers, 1 thread each): median training-step seconds; set-up seconds "
                  "(blocks + index exchange); bytes equal to the model", "",
                  "| graph | P | algo | order | dense step s | sparse step s | dense set-up s | sparse set-up s | "
                  "dense KiB | sparse KiB | = model |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r, s in _paired(measured, "dense", lambda r: "sparse"):
            lines.append(f"| {r['graph']} | {r['p']} | {r['algo']} | {r['reorder']} | {r['step_s']} | {s['step_s']} | "
                         f"{r['setup_s']} | {s['setup_s']} | {r['max_bytes'] / 1024:,.0f} | "
                         f"{s['max_bytes'] / 1024:,.0f} | {r['model_equal'] and s['model_equal']} |")
        cached = list(_paired(measured, "+cache", lambda c: c["comm"].split("+")[0]))
        if cached:
            lines += ["", "Measured with `--cache-panels` against the same run without: median step seconds, the "
                      "panels' one-time broadcasts (seconds, bytes of the busiest rank), bytes per step", "",
                      "| graph | P | algo | order | comm | step s | cached step s | panel cache s | panel cache KiB | "
                      "KiB | cached KiB | = model |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for c, r in cached:
                lines.append(f"| {c['graph']} | {c['p']} | {c['algo']} | {c['reorder']} | {r['comm']} | "
                             f"{r['step_s']} | {c['step_s']} | {c['panel_cache_s']} | "
                             f"{c['panel_cache_bytes'] / 1024:,.0f} | {r['max_bytes'] / 1024:,.0f} | "
                             f"{c['max_bytes'] / 1024:,.0f} | {r['model_equal'] and c['model_equal']} |")
        rows = list(_paired(measured, "+rows", lambda c: c["comm"].removesuffix("+rows")))
        if rows:
            lines += ["", "Measured with `--full-feature-rows` against the same run without (both with cached panels): "
                      "median step seconds, bytes per step", "",
                      "| graph | P | algo | order | step s | full-rows step s | KiB | full-rows KiB | = model |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for c, r in rows:
                lines.append(f"| {c['graph']} | {c['p']} | {c['algo']} | {c['reorder']} | {r['step_s']} | "
                             f"{c['step_s']} | {r['max_bytes'] / 1024:,.0f} | {c['max_bytes'] / 1024:,.0f} | "
                             f"{r['model_equal'] and c['model_equal']} |")
        deferred = list(_paired(measured, "+defer", lambda c: c["comm"].removesuffix("+defer")))
        if deferred:
            lines += ["", "Measured with `--defer-weight-gather` against the same run without (one invocation "
                      "each; `results/defer_weight_gather` alternates repeated runs): median step seconds, bytes "
                      "per step", "",
                      "| graph | P | algo | order | comm | step s | deferred step s | KiB | deferred KiB | = model |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            for c, r in deferred:
                lines.append(f"| {c['graph']} | {c['p']} | {c['algo']} | {c['reorder']} | {r['comm']} | "
                             f"{r['step_s']} | {c['step_s']} | {r['max_bytes'] / 1024:,.0f} | "
                             f"{c['max_bytes'] / 1024:,.0f} | {r['model_equal'] and c['model_equal']} |")
    return lines

"""`dlperf recommend`'s figure: estimated throughput against launch price, per catalog device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dlperf.report.plots import _pyplot, log_scale, save_figure

if TYPE_CHECKING:
    from dlperf.hardware.recommend import Estimate


def recommend_plot(ranked: list[Estimate], others: list[Estimate], out_dir: Path, stem: str,
                   title: str, budget_usd: float | None = None, target_ips: float | None = None,
                   samples: str = "images") -> list[Path]:
    """Log-log estimated `samples`/s against launch price: qualifying devices filled and named, the rest
    hollow; devices without a price are left off (said in the caption). Returns the written files."""
    plt = _pyplot()

    def priced(ests: list[Estimate]) -> list[Estimate]:
        return [e for e in ests if e["device"].value("launch_price_usd") and e.get("images_per_s")]

    shown, grey = priced(ranked), priced(others)
    if not shown and not grey:
        raise ValueError("no device has both a launch price and an estimate to place")
    fig, ax = plt.subplots(figsize=(9, 6))
    colours = {"gpu": "tab:green", "cpu": "tab:blue", "soc": "tab:orange", "accelerator": "tab:purple"}
    for e in grey:
        d = e["device"]
        ax.scatter(d.value("launch_price_usd"), e["images_per_s"], s=40, facecolors="none",
                   edgecolors=colours.get(d.kind, "0.4"), alpha=0.7)
        ax.annotate(d.id, (d.value("launch_price_usd"), e["images_per_s"]), xytext=(4, -9),
                    textcoords="offset points", fontsize=7, color="0.55")
    for e in shown:
        d = e["device"]
        ax.scatter(d.value("launch_price_usd"), e["images_per_s"], s=55, color=colours.get(d.kind, "0.2"))
        ax.annotate(f"#{e['rank']} {d.id}", (d.value("launch_price_usd"), e["images_per_s"]), xytext=(5, 3),
                    textcoords="offset points", fontsize=8)
    for kind, colour in colours.items():
        if any(e["device"].kind == kind for e in shown + grey):
            ax.scatter([], [], color=colour, label=kind)
    ax.scatter([], [], facecolors="none", edgecolors="0.4", label="left out (reason in the table)")
    if budget_usd:
        ax.axvline(budget_usd, color="tab:red", ls="--", lw=1, label=f"budget ${budget_usd:,.0f}")
    if target_ips:
        ax.axhline(target_ips, color="tab:red", ls=":", lw=1, label=f"target {target_ips:,.0f} {samples}/s")
    log_scale(ax, "x")
    log_scale(ax, "y")
    ax.set_xlabel("launch price, USD (catalog)")
    ax.set_ylabel(f"ESTIMATED {samples}/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    n_off = len(ranked) + len(others) - len(shown) - len(grey)
    fig.text(0.01, 0.01, f"estimates (roofline x efficiency); {n_off} devices without a price or an estimate "
             "are not placed", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return save_figure(fig, out_dir, stem)

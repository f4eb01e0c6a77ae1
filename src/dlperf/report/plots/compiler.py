"""The compiler variants' plot (`report.compiler_report`): each variant's speed-up over eager against batch size, a
panel per source, framework, device and precision, a line per variant with its 95% interval as error bars, and a
dashed line at 1 (no speed-up). PNG and SVG through `plots.save_figure`."""

from __future__ import annotations

from pathlib import Path

from dlperf.report.plots import line_styles, log_scale, panel_grid, save_figure

#: A point: (batch, speed-up, its 95% interval's low and high).
Point = tuple[int, float, float, float]


def speedup_batch_plot(panels: dict[str, dict[str, list[Point]]], out_dir: Path,
                       stem: str = "compiler-speedup-per-batch") -> list[Path]:
    """`panels`: title -> variant -> points; only panels where a variant has two batches or more are drawn."""
    panels = {t: {v: sorted(p) for v, p in lines.items() if len(p) >= 2} for t, lines in panels.items()}
    panels = {t: lines for t, lines in panels.items() if lines}
    if not panels:
        return []
    fig, axes = panel_grid(len(panels))
    style = line_styles(v for lines in panels.values() for v in lines)
    for ax, (title, lines) in zip(axes.flat, panels.items(), strict=False):
        for variant, pts in lines.items():
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            err = [[y - p[2] for y, p in zip(ys, pts, strict=True)], [p[3] - y for y, p in zip(ys, pts, strict=True)]]
            colour, marker = style[variant]
            ax.errorbar(xs, ys, yerr=err, color=colour, marker=marker, capsize=3, label=variant)
        ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1.0, label="eager (1x)")
        log_scale(ax, "x", base=2)
        log_scale(ax, "y")
        ax.set_xlabel("batch size (samples per call)")
        ax.set_ylabel("speed-up over eager (x; bars: 95% interval)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


__all__ = ["Point", "speedup_batch_plot"]

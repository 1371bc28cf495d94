"""What every figure of the report stages shares: its title marked SIMULATED, and its PNG written whole. Apart from
report.plots, which draws from pandas frames, so a stage drawing from plain arrays (report_grading) loads no
pandas (~0.5 CPU s of start-up)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure  # the object API draws to files without a GUI backend

from tracevote.core.fileio import atomic_path


def titled(text: str, simulated: bool) -> str:
    return f"SIMULATED — {text}" if simulated else text


def save_png(figure: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")

"""The report's plots: a panel per method against the baselines, the heat map's rows, and exactly the intended
`dvc plots show`, each figure once."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tests.deepconf.test_online import small_online_aggregate
from tests.dvcproject import dvc, make_project
from tests.images import assert_not_blank
from tests.test_pipeline import drawn_title, small_sim_params
from tracevote.core.csvtext import columns_csv
from tracevote.report import compare, critique, grading, plots
from tracevote.report.compare import DebatePoint, OnlinePoint, VotingCurve
from tracevote.report.figures import plot_csv

MEASURES = ("avg", "bottom10", "lowest", "tail")
METHODS = ("pass1", "cons", *(f"{m}{top}" for m in MEASURES for top in ("", "_top10", "_top90")))
KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# accuracy_vs_k.png and accuracy_vs_tokens.png draw what the DVC plots of the same CSVs draw: not listed twice
INTENDED_PLOTS = {"accuracy_vs_k_avg", "accuracy_vs_k_bottom10", "accuracy_vs_k_lowest", "accuracy_vs_k_tail",
                  "plots/deepconf/toy/confidence.png", "accuracy_vs_tokens", "critique_f1_by_task",
                  "plots/critique/critique.png", "plots/grading/word_counts.png"}


GRADED_RUN = {"run": "toy_run", "dataset": "toy", "accuracy": 0.5, "correct": 4, "total": 8, "simulated": True,
              "avg_word_count": 120.0, "avg_word_count_correct": 100.0, "avg_word_count_incorrect": None}


def synthetic_voting() -> VotingCurve:
    curve = synthetic_curve()
    online = {f"online_{name}": tuple(OnlinePoint(k, 0.6 + 0.02 * i + shift, 1500.0 * k * (0.4 + shift))
                                      for i, k in enumerate(KS[4:]))
              for name, shift in (("low", 0.05), ("high", 0.0))}
    return VotingCurve(KS, METHODS, {m: tuple(curve[m]) for m in METHODS}, tokens_per_trace=1500.0, problems=12,
                       online=online)


def synthetic_curve() -> pd.DataFrame:
    """What plots.accuracy_curve returns for METHODS at KS without bootstrap: accuracy rising with log2 K."""
    table: dict[str, list[float]] = {"k": list(KS)}
    for number, method in enumerate(METHODS):
        table[method] = [0.4 + 0.01 * number * math.log2(k) / 9 for k in KS]
        table[f"{method}_std"] = [0.05 / math.sqrt(k) for k in KS]
    return pd.DataFrame(table)


def synthetic_scores(rng: np.random.Generator) -> pd.DataFrame:
    correct = rng.random(400) < 0.5
    table = {"valid": np.ones(400, dtype=bool), "correct": correct}
    table.update({m: rng.normal(7 + correct, 1) for m in MEASURES})
    return pd.DataFrame(table)


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("avg", ["pass1", "cons", "avg", "avg_top10", "avg_top90"]),
        ("tail", ["pass1", "cons", "tail", "tail_top10", "tail_top90"]),
    ],
)
def test_each_panel_draws_the_baselines_its_measure_and_its_top_variants(measure: str, expected: list[str]) -> None:
    lines = plots.panel_methods(METHODS, measure)
    assert [method for method, *_ in lines] == expected
    assert len({colour for _, _, colour, _ in lines}) == 5  # every line of a panel has its own colour


def test_the_legend_names_roles_not_one_measure() -> None:
    labels = [label for _, label, _, _ in plots.panel_methods(METHODS, "lowest")]
    assert labels[0] == "Pass@1" and labels[1].startswith("Cons@K")
    assert labels[-2].startswith("top-10%@K") and labels[-1].startswith("top-90%@K")


@pytest.mark.parametrize(
    ("methods", "online", "expected"),
    [
        (METHODS, (), [("avg", ["avg", "avg_top10", "avg_top90"]), ("bottom10", ["bottom10", "bottom10_top10",
          "bottom10_top90"]), ("lowest", ["lowest", "lowest_top10", "lowest_top90"]),
          ("tail", ["tail", "tail_top10", "tail_top90"])]),
        (("pass1", "cons", "lowest", "lowest_top10"), ("online_low", "online_high"),
         [("lowest", ["lowest", "lowest_top10"]), ("online (lowest, replayed)", ["online_low", "online_high"])]),
    ],
)
def test_the_accuracy_figure_has_a_row_per_measure_and_a_panel_per_method(
        methods: tuple[str, ...], online: tuple[str, ...], expected: list[tuple[str, list[str]]]) -> None:
    rows = plots.accuracy_rows(methods, online)
    assert [(name, [method for method, *_ in lines]) for name, lines in rows] == expected


@pytest.mark.parametrize(
    ("labels", "predictions", "expected"),
    [
        # no solution's first error is at step 1: no row for it (step 2 is still there, as a prediction)
        ([-1, -1, 0, 2], [-1, 2, 0, 2], [(0, "none (n=2)"), (1, "0 (n=1)"), (3, "2 (n=1)")]),
        # every solution has an error: no "none" row
        ([0, 1], [None, 1], [(1, "0 (n=1)"), (2, "1 (n=1)")]),
        ([12, -1], [3, None], [(0, "none (n=1)"), (11, "10+ (n=1)")]),
    ],
)
def test_the_heat_map_shows_only_the_rows_some_solution_has(labels: list[int], predictions: list[int | None],
                                                            expected: list[tuple[int, str]]) -> None:
    cap = critique.position_cap(labels, predictions)
    assert critique.heat_map_rows(critique.position_matrix(labels, predictions, cap), cap) == expected


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """accuracy_vs_k.png and confidence.png drawn once from the synthetic data (~1 CPU s): the test that the
    files are written checks them, the `dvc plots show` test shows them."""
    folder = tmp_path_factory.mktemp("drawn")
    plots.plot_accuracy(synthetic_curve(), METHODS, folder / "accuracy_vs_k.png", simulated=True)
    plots.plot_confidence(synthetic_scores(np.random.default_rng(0)), MEASURES, folder / "confidence.png",
                          simulated=True)
    return folder


def test_plot_files_are_written(tmp_path: Path, drawn: Path) -> None:
    curve = synthetic_curve().assign(online_low=[None] * 4 + [0.7] * 6, online_low_std=[None] * 4 + [0.02] * 6)
    plots.plot_accuracy(curve, METHODS, tmp_path / "accuracy_vs_k_online.png", simulated=True,
                        online_methods=("online_low",))
    for path in (drawn / "accuracy_vs_k.png", tmp_path / "accuracy_vs_k_online.png", drawn / "confidence.png"):
        assert_not_blank(path)
    assert not list(tmp_path.glob(".*.tmp")) and not list(drawn.glob(".*.tmp"))


def assert_laid_out(figure: Figure, shared_texts: int = 2) -> None:
    """Drawn, every visible panel (its titles, tick labels and axis labels included) lies inside the figure and
    clear of the figure's title and legend (`shared_texts` of them): the margins set by hand leave room for what
    they hold."""
    canvas = FigureCanvasAgg(figure)
    figure.draw_without_rendering()
    renderer = canvas.get_renderer()
    inside = figure.bbox.padded(1)
    shared = [text.get_window_extent(renderer) for text in [*figure.texts, *figure.legends]]
    assert len(shared) == shared_texts
    for text in shared:
        assert inside.containsx(text.x0) and inside.containsx(text.x1), text
        assert inside.containsy(text.y0) and inside.containsy(text.y1), text
    for axis in figure.axes:
        if axis.get_visible():
            box = axis.get_tightbbox(renderer)
            assert inside.containsx(box.x0) and inside.containsx(box.x1) and inside.containsy(box.y0), box
            assert inside.containsy(box.y1), box
            for text in shared:
                assert not box.overlaps(text), (axis.get_title(), box, text)


@pytest.mark.parametrize("online", [(), ("online_low",)])
def test_the_accuracy_panels_clear_the_title_and_the_legend(online: tuple[str, ...]) -> None:
    curve = synthetic_curve().assign(online_low=[None] * 4 + [0.7] * 6, online_low_std=[None] * 4 + [0.02] * 6)
    assert_laid_out(plots.accuracy_figure(curve, METHODS, simulated=True, online_methods=online, ci_level=0.95))


def test_one_panel_wide_the_title_and_the_legend_still_fit() -> None:
    """Without filtered methods a row is one panel: the figure stays as wide as its title and legend need."""
    methods = ("pass1", "cons", "avg")
    assert_laid_out(plots.accuracy_figure(synthetic_curve()[["k", *methods, *(f"{m}_std" for m in methods)]],
                                          methods, simulated=True))
    assert_laid_out(plots.confidence_figure(synthetic_scores(np.random.default_rng(0)), ("avg",), simulated=True),
                    shared_texts=1)


def test_the_token_panels_clear_the_title_and_the_legend() -> None:
    assert_laid_out(compare.accuracy_vs_tokens_figure(synthetic_voting(), DebatePoint(0.6, 9000.0, 6.0, 12),
                                                      simulated=True, datasets=["toy"]))


@pytest.mark.slow
def test_dvc_plots_show_lists_exactly_the_intended_plots(tmp_path: Path, drawn: Path) -> None:
    project = make_project(tmp_path / "project", small_sim_params())
    folder = project / "plots" / "deepconf" / "toy"
    folder.mkdir(parents=True)
    synthetic_curve().to_csv(folder / "accuracy_vs_k.csv", index=False)
    for name in ("accuracy_vs_k.png", "confidence.png"):
        shutil.copy(drawn / name, folder / name)
    debate = DebatePoint(0.6, 9000.0, 6.0, 12)
    compare.plot_accuracy_vs_tokens(synthetic_voting(), debate, project / "plots" / "accuracy_vs_tokens.png",
                                    simulated=True, datasets=["toy"])
    tokens_curve = compare.curve_table(synthetic_voting(), debate)
    (project / "plots" / "accuracy_vs_tokens.csv").write_text(columns_csv(tokens_curve, "%.4f"))
    rows = [{"dataset": "toy_steps", "task": "toy_steps", "n_error": 2, "n_correct": 1, "error_accuracy_pct": 50.0,
             "correct_accuracy_pct": 100.0, "f1_pct": 66.67, "unanimous_pct": 0.0, "unparsable_pct": 0.0}]
    (project / "plots" / "critique").mkdir(parents=True)
    (project / "plots" / "critique" / "f1_by_task.csv").write_text(columns_csv(critique.f1_table(rows), "%.2f"))
    critique.plot_critique(rows, [-1, 0, 2], [-1, 1, 2], project / "plots" / "critique" / "critique.png",
                           simulated=True)
    grading.plot_word_counts([GRADED_RUN], project / "plots" / "grading" / "word_counts.png")
    for image in sorted(project.glob("plots/**/*.png")):
        assert_not_blank(image)
    shown = json.loads(dvc(project, "plots", "show", "--json").stdout)
    assert not shown.get("errors")
    assert set(shown["data"]) == INTENDED_PLOTS
    by_method = shown["data"]["accuracy_vs_tokens"][0]["content"]
    assert by_method["encoding"]["color"]["field"] == "label" and by_method["encoding"]["x"]["scale"]["type"] == "log"
    labels = {row["label"] for row in by_method["data"]["values"]}
    assert {"Cons@K", "DeepConf-low online@K", "Debate (DyLAN)", "Pass@1"} <= labels
    f1 = shown["data"]["critique_f1_by_task"][0]["content"]
    assert f1["encoding"]["x"]["field"] == "f1_pct" and f1["encoding"]["x"]["title"] == "F1 (%)"
    assert [row["f1_pct"] for row in f1["data"]["values"]] == ["66.67"]
    tail = shown["data"]["accuracy_vs_k_tail"][0]["content"]
    # these CSVs have no `simulated` column (as a revision from before it): the title without the banner
    assert drawn_title(tail) == "tail: accuracy vs K (toy, endpoint deepseek, backend sim)"
    fields = {row["field"] for row in tail["data"]["values"]}
    assert fields == {"pass1", "cons", "tail", "tail_top10", "tail_top90"}
    assert tail["encoding"]["x"]["scale"] == {"type": "log", "base": 2}  # our template: K itself on a log axis
    assert [layer["mark"]["type"] for layer in tail["layer"]] == ["area", "line"]  # a band under each line


def test_the_report_draws_its_score_table_read_without_pandas_as_it_drew_the_frame(tmp_path: Path) -> None:
    """The report stage reads the score table through pyarrow alone (plots.read_confidences): the same confidence
    figure, pixel for pixel, as from pandas' frame of it; each histogram counts the valid traces with a value."""
    scores = synthetic_scores(np.random.default_rng(1))
    scores.loc[::7, "valid"] = False
    scores.loc[::5, "lowest"] = math.nan
    path = tmp_path / "scores.parquet"
    scores.to_parquet(path)
    columns = plots.read_confidences(path, MEASURES)
    assert set(columns) == {"valid", "correct", *MEASURES} and all(isinstance(c, np.ndarray) for c in columns.values())
    figures = [plots.confidence_figure(table, MEASURES, simulated=True) for table in (columns, pd.read_parquet(path))]
    pixels = []
    for figure in figures:
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        pixels.append(np.asarray(canvas.buffer_rgba()).copy())
    assert np.array_equal(*pixels)
    kept = scores["valid"] & scores["lowest"].notna()
    lowest_panel = figures[0].axes[MEASURES.index("lowest")]
    assert lowest_panel.get_legend_handles_labels()[1] == [f"correct (n={(kept & scores['correct']).sum()})",
                                                           f"incorrect (n={(kept & ~scores['correct']).sum()})"]


def test_the_curve_as_plain_columns_writes_the_csv_its_frame_wrote() -> None:
    """accuracy_curve's columns (None below an online method's warmup) through figures.plot_csv, byte for byte as
    the frame of them through dvc_plot_csv."""
    result, _ = small_online_aggregate()
    curve = plots.accuracy_curve(result)
    assert None in curve["online_low"], "the online method is empty below its warmup"
    assert plot_csv(curve, simulated=True, float_format="%.6f") == plots.dvc_plot_csv(
        pd.DataFrame(curve), simulated=True, float_format="%.6f")

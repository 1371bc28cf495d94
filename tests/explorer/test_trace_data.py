"""tracevote.explorer.trace_data: a trace page's data against the pool's stored values, hand-computed window means,
the stop table and the aggregate's working sets; and the files trace_sections writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import orjson
import pytest

from bench.explorer_trace_project import DATASET, GROUP, TRACES, PoolProject
from bench.top_tokens_cost import FIXTURES, reply_body
from tests.conftest import FIXTURE_PARAMS
from tests.explorer.trace_project import trace_project
from tests.store.test_framing_codec import make_sample
from tracevote.core.config import load_params
from tracevote.core.config_view import ViewConfig
from tracevote.core.study_paths import model_paths
from tracevote.deepconf.stop_table import StopRows
from tracevote.deepconf.working_sets import working_sets
from tracevote.explorer.build import build_site
from tracevote.explorer.live_traces import live_sections, open_live
from tracevote.explorer.sitefiles import SiteWriter
from tracevote.explorer.trace_data import (
    TraceSource,
    Window,
    open_traces,
    reasoning_tokens,
    thresholds,
    top_chunk,
    top_record,
    trace_record,
    trace_sections,
    unpacked_strings,
    unpacked_top,
    utf16_lengths,
    window_curve,
    would_stop,
)
from tracevote.sampling.ingest import parse_completion


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> PoolProject:
    return trace_project(tmp_path_factory)


@pytest.mark.parametrize(("signal", "group", "ends", "means"), [
    ([1.0, 3.0, 2.0, 6.0], 2, [1, 2, 3], [2.0, 2.5, 4.0]),
    ([1.0, 3.0, 2.0, 6.0], 4, [3], [3.0]),
    ([1.0, 3.0, 2.0], 4, [], []),  # shorter than a window: no full window, no curve
    ([1.0, np.nan, 3.0, 5.0], 2, [2, 3], [2.0, 4.0]),  # a token without a confidence is left out
])
def test_window_curve_by_hand(signal: list[float], group: int, ends: list[int], means: list[float]) -> None:
    got_ends, got_means = window_curve(np.array(signal), group)
    assert got_ends.tolist() == ends and got_means.tolist() == pytest.approx(means)


@pytest.mark.parametrize(("threshold", "spent"), [(2.5, 6), (1.5, 9), (0.5, None), (3.5, 3), (None, None)])
def test_would_stop_is_the_first_record_below(threshold: float | None, spent: int | None) -> None:
    rows = StopRows(sample=np.zeros(3, dtype=np.int64), spent=np.array([3, 6, 9]), value=np.array([3.0, 2.0, 1.0]))
    assert would_stop(rows, threshold) == spent


@pytest.mark.parametrize(("tokens", "lengths"), [
    (["a", " bc"], [1, 3]), (["é", "∑"], [1, 1]), (["😀", "x"], [2, 1]), (["\ud83d", "\ude00"], [1, 1]),
    (["é", "a😀b", "\ud83d", "𝑥𝑦"], [1, 4, 1, 4]),  # one character past U+FFFF anywhere: each token encoded
])
def test_token_lengths_are_javascript_string_lengths(tokens: list[str], lengths: list[int]) -> None:
    assert utf16_lengths(tokens) == lengths


def test_the_reasoning_tokens_are_those_before_the_content() -> None:
    tokens = ["<think>", "so ", "5", "</think>", "\n\n", "\\boxed{5}"]
    sample = dataclasses.replace(make_sample(tokens=tokens), text="\\boxed{5}", reasoning="so 5")
    assert reasoning_tokens(sample) == 5
    assert reasoning_tokens(dataclasses.replace(sample, reasoning="")) == 0


def test_a_token_cut_inside_a_character_keeps_its_length_and_serialises() -> None:
    sample = make_sample(tokens=["a", "\ud83d", "\ude00", "</script>"])
    record = trace_record(sample, _confidence(), {})
    assert record["lens"] == [1, 1, 1, 9] and record["text"] == "a\ufffd\ufffd</script>"
    orjson.dumps(record)  # a lone surrogate would make it fail


def _confidence():

    return dataclasses.replace(load_params(FIXTURE_PARAMS).confidence, group_size=2)


def samples_of(project: PoolProject, problem_id: str) -> dict:
    return {s.sample_id: s for s in project.pool.iter_samples(problem_id)}


def test_each_trace_matches_the_pool_the_stop_table_and_hand_windows(project: PoolProject) -> None:
    source = open_traces(model_paths("deepseek", DATASET, "deepseek"), project.root, project.params)
    assert source is not None
    checked_stops = 0
    for problem_id, (ids, lowest, _) in source.scores.items():
        found = thresholds(problem_id, lowest, project.params)
        samples = samples_of(project, problem_id)
        for sample_id in ids.tolist():
            sample = samples[sample_id]
            stored = np.asarray(sample.token_confidence, dtype=np.float64)  # deepconf at the pool's k: C_i
            means = [stored[a:a + GROUP].mean() for a in range(len(stored) - GROUP + 1)]  # a plain loop
            stops = {t.method: _first_below(means, t.median) for t in found}
            record = trace_record(sample, Window.of(project.params.confidence), stops)
            assert record["conf"] == [round(v, 3) + 0.0 for v in stored.tolist()]
            assert record["chosen"] == [round(v, 3) + 0.0 for v in sample.token_logprobs.tolist()]
            assert record["curve"]["values"] == [round(m, 3) + 0.0 for m in means]
            assert record["curve"]["first"] == (GROUP - 1 if means else None)
            assert "".join(sample.tokens) == record["text"] and sum(record["lens"]) == len(record["text"])
            # the stop table (the score stage's) says the same as the hand windows
            profiles = _rows_of(source, problem_id, sample_id)
            for t in found:
                assert would_stop(profiles, t.median) == stops[t.method]
                checked_stops += stops[t.method] is not None
    assert checked_stops > 0  # some trace stops under some threshold, so the comparison has teeth


def _first_below(means: list[float], threshold: float | None) -> int | None:
    """Tokens spent at the first full window whose mean is below the threshold (its last token included)."""
    for start, mean in enumerate(means):
        if threshold is not None and mean < threshold:
            return start + GROUP
    return None


def _rows_of(source: TraceSource, problem_id: str, sample_id: int) -> StopRows:
    rows = source.stops.rows_of(problem_id)
    mine = rows.sample == sample_id
    return StopRows(sample=rows.sample[mine], spent=rows.spent[mine], value=rows.value[mine])


def test_thresholds_are_the_median_over_the_aggregates_working_sets(project: PoolProject) -> None:
    params = project.params
    source = open_traces(model_paths("deepseek", DATASET, "deepseek"), project.root, params)
    problem_id, (ids, lowest, _) = next(iter(source.scores.items()))
    sets = working_sets(problem_id, len(ids), params.report.k, params.eval)
    found = {t.method: t for t in thresholds(problem_id, lowest, params)}
    assert set(found) == {"online_low", "online_high"}
    for name, percentile in params.online.percentiles.items():
        per_set = [np.percentile(lowest[row[:params.online.warmup]], percentile) for row in sets]  # the reference
        got = found[f"online_{name}"]
        assert (got.median, got.low, got.high) == pytest.approx((np.median(per_set), min(per_set), max(per_set)))


def read_data(site: Path, path: str) -> dict:
    body = (site / "data" / f"{path}.js").read_bytes()
    prefix = b'TV.put("' + path.encode() + b'", '
    assert body.startswith(prefix) and body.endswith(b");\n")
    return orjson.loads(body[len(prefix):-3])


def test_trace_sections_writes_every_trace_once_in_chunks(project: PoolProject, tmp_path: Path) -> None:
    source = open_traces(model_paths("deepseek", DATASET, "deepseek"), project.root, project.params)
    problem_id = next(iter(source.scores))
    with SiteWriter(tmp_path / "site") as writer:
        assert trace_sections(writer, 0, 3, problem_id, source, chunk=5) == "pool0/p3/traces"
        writer.finish()
    site = tmp_path / "site"
    index = read_data(site, "pool0/p3/traces")
    assert [len(ids) for ids in index["chunks"]] == [5, 5, 5, 1]
    assert sorted(i for ids in index["chunks"] for i in ids) == list(range(TRACES))
    assert index["has_top"] and index["top_tokens"] and index["simulated"]
    samples = samples_of(project, problem_id)
    for j, ids in enumerate(index["chunks"]):
        assert [t["id"] for t in read_data(site, f"pool0/p3/c{j}")["traces"]] == ids
        chunk = read_data(site, f"pool0/p3/c{j}_top")
        assert [t["id"] for t in chunk["traces"]] == ids
        for top in chunk["traces"]:
            sample = samples[top["id"]]
            assert unpacked_strings(chunk, top) == sample.top_tokens
            expected = np.round(sample.top_logprobs.astype(np.float64), 2) + 0.0
            np.testing.assert_array_equal(unpacked_top(top["top"], top["k"]), expected)


def test_a_project_without_the_pools_samples_has_no_trace_files(project: PoolProject, tmp_path: Path) -> None:
    assert open_traces(model_paths("deepseek", DATASET, "deepseek"), tmp_path, project.params) is None


def test_live_traces_show_where_the_run_stopped_them(project: PoolProject, tmp_path: Path) -> None:
    source = open_live(project.params, project.root, DATASET)
    assert source is not None and [name for name, _ in source.ledgers] == ["warmup", "low"]
    problem_id = project.pool.problem_ids()[0]
    with SiteWriter(tmp_path / "site") as writer:
        listed = live_sections(writer, 0, 0, problem_id, source)
        writer.finish()
    stopped = 0
    for m, (name, ledger) in enumerate(source.ledgers):
        traces = ledger.traces(problem_id)
        assert listed["ledgers"][m]["chunks"] == [sorted(traces)]
        records = {r["id"]: r for r in read_data(tmp_path / "site", f"pool0/p0/l{m}_c0")["traces"]}
        for index, trace in traces.items():
            live = records[index]["live"]
            if name == "warmup":
                assert live is None
                continue
            assert (live["spent"], live["received"], live["reason"]) == (
                trace.sample.n_tokens, trace.received, trace.stop_reason)
            assert live["threshold"] == round(trace.threshold, 3)
            if trace.stop_reason == "confidence":  # its last window is the first below the threshold
                confidence = np.asarray(trace.sample.token_confidence, dtype=np.float64)
                means = [confidence[a:a + GROUP].mean() for a in range(len(confidence) - GROUP + 1)]
                assert _first_below(means, trace.threshold) == trace.sample.n_tokens
                stopped += 1
    assert stopped > 0
    assert {row["index"] for row in listed["traces"] if row["method"] == "low"} == set(source.ledgers[1][1].traces(
        problem_id))


def test_no_live_run_without_its_dataset_in_online_live(project: PoolProject) -> None:
    params = dataclasses.replace(project.params, online=dataclasses.replace(
        project.params.online, live=dataclasses.replace(project.params.online.live, datasets=())))
    assert open_live(params, project.root, DATASET) is None


def test_a_chunks_strings_pad_short_rows_and_mend_cut_characters() -> None:
    """llama.cpp's rows may hold fewer strings than k (their logprobs absent); a token cut inside a character is a
    lone surrogate, which JSON cannot hold."""
    chunk = top_chunk([{"id": 0, "k": 3, "top": "", "top_tokens": [["a", "\ud83d"], ["b", "a", "c"]]},
                       {"id": 1, "k": 3, "top": "", "top_tokens": None}])
    assert unpacked_strings(chunk, chunk["traces"][0]) == [["a", "\ufffd", ""], ["b", "a", "c"]]
    assert unpacked_strings(chunk, chunk["traces"][1]) is None
    orjson.dumps(chunk)


@pytest.mark.parametrize(("fixture", "thinking_ends_with"), [
    ("reasoning/vllm_parser.json", "</think>"),  # vLLM's parser leaves the blank line to the content
    ("reasoning/sglang_parser.json", "</think>\n\n"),
    ("llamacpp/chat_top20.json", None),  # no parser: no thinking marked
])
def test_the_thinking_of_real_engines_replies_is_marked(fixture: str, thinking_ends_with: str | None) -> None:
    body = reply_body(FIXTURES / fixture)
    sample = parse_completion(body, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                              expect_top_logprobs=20, keep_top_tokens=True)
    record = trace_record(sample, Window("deepconf", None, 8), {})
    thinking = "".join(sample.tokens[:record["reasoning"]])
    if thinking_ends_with is None:
        assert record["reasoning"] == 0
    else:
        assert thinking.endswith(thinking_ends_with) and sample.reasoning.strip() in thinking
        assert "".join(sample.tokens[record["reasoning"]:]) == sample.text
    chunk = top_chunk([top_record(sample)])
    assert unpacked_strings(chunk, chunk["traces"][0]) == [[*row, *[""] * (20 - len(row))] for row in sample.top_tokens]


def test_only_the_chosen_traces_get_a_page_and_every_trace_keeps_its_row(project: PoolProject, tmp_path: Path) -> None:
    """view.trace_pages 3 of 16 traces: the 3 most and 3 least confident by avg (the page's own numbers) have
    their data files, the others none; the problem page lists all 16 and names the subset."""
    params = dataclasses.replace(project.params, view=ViewConfig(trace_pages=3, trace_pages_by="avg"))
    build_site(params, project.root, tmp_path / "site")
    for i in range(2):
        page = read_data(tmp_path / "site", f"pool0/p{i}")
        rows = page["traces"]
        assert sorted(rows["sample_id"]) == list(range(TRACES))
        ranked = sorted(zip(rows["avg"], rows["sample_id"], strict=True), key=lambda pair: (-pair[0], pair[1]))
        least = sorted(ranked, key=lambda pair: (pair[0], pair[1]))
        chosen = {sample_id for _, sample_id in ranked[:3]} | {sample_id for _, sample_id in least[:3]}
        assert len(chosen) == 6
        assert page["trace_subset"] == {"pages": 6, "traces": TRACES, "per_end": 3, "by": "avg",
                                        "ids": sorted(chosen)}
        index = read_data(tmp_path / "site", page["trace_data"])
        assert index["scored"] == TRACES
        written = [t["id"] for j in range(len(index["chunks"]))
                   for t in read_data(tmp_path / "site", f"pool0/p{i}/c{j}")["traces"]]
        assert sorted(written) == sorted(chosen) == sorted(i for ids in index["chunks"] for i in ids)
        tops = [t["id"] for j in range(len(index["chunks"]))
                for t in read_data(tmp_path / "site", f"pool0/p{i}/c{j}_top")["traces"]]
        assert sorted(tops) == sorted(chosen)
    pool_index = read_data(tmp_path / "site", "pool0/index")
    assert (pool_index["trace_pages"]["per_end"], pool_index["trace_pages"]["by"]) == (3, "avg")


def test_a_pool_within_the_setting_gives_every_trace_a_page(project: PoolProject, tmp_path: Path) -> None:
    build_site(project.params, project.root, tmp_path / "site")  # the default, 32 per end, beyond 16 traces
    page = read_data(tmp_path / "site", "pool0/p0")
    assert page["trace_subset"] is None
    index = read_data(tmp_path / "site", page["trace_data"])
    assert sorted(i for ids in index["chunks"] for i in ids) == list(range(TRACES))

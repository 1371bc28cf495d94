"""Online DeepConf's rules as a live run applies them, one trace and one token batch at a time.

The replay (tracevote.deepconf.online) decides from whole stored traces; a live run decides while tokens
arrive. Both reach the same numbers by the same operations, so on traces with the same tokens they stop at the
same token and end sampling at the same trace:
- `warmup_threshold`: np.percentile (linear) of the warmup traces' lowest-group confidences, as
  deepconf.voting.row_percentile computes it; NaN (never stop) when no warmup trace has a confidence.
- `WindowStop`: a trace's window sums are differences of its prefix sums of C_i (float32 values summed in float64
  in token order, tokens without a confidence left out), as deepconf.confidence computes them; the trace stops at
  the first full window whose sum / width is below the threshold, having spent the tokens up to and including
  that window's last one. (That window is always one of the replay's record lows: every earlier window's mean is
  at least the threshold, so its sum is a new low.)
- The consensus stop: deepconf.online.consensus_checks on the traces stored so far, in trace order (the check
  after trace i reads traces 0..i alone, so the same numbers whenever it is made).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tracevote.answers.classes import answer_classes
from tracevote.answers.extract import resolve_answer, split_boxed_text, split_candidates
from tracevote.answers.mathverify import MathJudge
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.voting import row_percentile
from tracevote.store.live import LiveTrace
from tracevote.store.records import ProblemTraces


def lowest_groups(confidences: list[np.ndarray], group_size: int) -> np.ndarray:
    """float64 [traces]: each trace's lowest-group confidence (`trace_measures`' lowest: the lowest mean of a full
    window of `group_size` tokens with a confidence, or of all of them when fewer; NaN when none has one)."""
    confidence = [np.asarray(c, dtype=np.float32) for c in confidences]
    offsets = np.concatenate(([0], np.cumsum([len(c) for c in confidence]))).astype(np.int64)
    traces = ProblemTraces("", np.arange(len(confidence)), [], [], offsets,
                           np.concatenate(confidence) if confidence else np.empty(0, dtype=np.float32))
    # lowest depends on the window alone; the other measures' settings are placeholders
    return trace_measures(traces, ConfidenceConfig(group_size, bottom_fraction=1.0, tail_tokens=group_size)).lowest


def warmup_threshold(lowest: np.ndarray, percentile: float) -> float:
    """The stop threshold s: the `percentile` of the warmup traces' lowest-group confidences (NaN ones left out)."""
    return float(row_percentile(np.asarray(lowest, dtype=np.float64)[None, :], percentile)[0])


_MARGIN = 1e-9  # relative: a window sum this close to the threshold counts as below it for safe_tokens


class WindowStop:
    """The stop rule on one streaming trace: feed it each batch's C_i; it says where the trace stops.

    >>> rule = WindowStop(threshold=0.5, group_size=2)
    >>> rule.feed(np.array([0.9, 0.8], dtype=np.float32)), rule.feed(np.array([np.nan, 0.1], dtype=np.float32))
    (None, 4)
    """

    def __init__(self, threshold: float, group_size: int, capacity: int = 1024, *, nonnegative: bool = True) -> None:
        self.threshold = threshold
        self.nonnegative = nonnegative  # every value fed is >= 0 (C_i); false for chosen and entropy, which are <= 0
        self.width = group_size
        self._prefix = np.zeros(capacity + 1)  # prefix sums of the confident tokens' C_i; _prefix[0] = 0
        self._positions = np.zeros(capacity, dtype=np.int64)  # each confident token's index in the trace
        self._confident = 0
        self._seen = 0
        self.spent: int | None = None  # tokens spent when the trace stopped

    def feed(self, confidence: np.ndarray) -> int | None:
        """The tokens the trace has spent if it stops within these (its next) tokens, else None; after a stop,
        the same number again."""
        if self.spent is not None:
            return self.spent
        kept = ~np.isnan(confidence)
        values = confidence[kept]
        first, end = self._confident, self._confident + len(values)
        self._reserve(end)
        self._positions[first:end] = np.flatnonzero(kept) + self._seen
        self._seen += len(confidence)
        # continuing the running sum token by token reproduces a cumsum of the whole trace bit for bit
        running = np.concatenate((self._prefix[first:first + 1], values.astype(np.float64)))
        np.cumsum(running, out=running)
        self._prefix[first + 1:end + 1] = running[1:]
        self._confident = end
        self.spent = self._stop_within(first, end)
        return self.spent

    def safe_tokens(self) -> int | None:
        """How many more tokens can arrive before this rule could stop (None: no count, never or at any token; 0: it
        has stopped).

        A token's C_i is never negative (it is minus a mean of logprobs, each at most 0), so after m more confident
        tokens a full window's sum is at least that of the w - m newest tokens seen so far: the rule cannot stop
        until enough of them have left the window for that sum to fall below threshold × width. One token less,
        and a relative margin, keep the count on the safe side of rounding; a reader that hands tokens over
        sooner loses nothing."""
        if self.spent is not None:
            return 0
        if not self.nonnegative:
            return None  # a value <= 0 can pull any window below the threshold at once: no count can be promised
        if np.isnan(self.threshold) or self.threshold <= 0:
            return None  # a window's mean is never negative: it is never below such a threshold
        w, n = self.width, self._confident
        newest = np.arange(min(n, w - 1) + 1)  # j newest confident tokens, j = 0 .. w - 1
        sums = self._prefix[n] - self._prefix[n - newest]  # nondecreasing in j
        keep = int(np.searchsorted(sums, self.threshold * w * (1 - _MARGIN), side="left")) - 1  # largest j below
        return max(w - keep - 2, 0)

    def _stop_within(self, first: int, end: int) -> int | None:
        """Among the windows ending at confident tokens first+1..end, the first whose mean is below the threshold."""
        w = self.width
        ends = np.arange(max(w, first + 1), end + 1)
        if not len(ends) or np.isnan(self.threshold):
            return None
        sums = self._prefix[ends] - self._prefix[ends - w]
        below = np.flatnonzero(sums / w < self.threshold)
        if not len(below):
            return None
        return int(self._positions[ends[below[0]] - 1]) + 1

    def _reserve(self, confident: int) -> None:
        if confident < len(self._positions):
            return
        size = max(confident + 1, 2 * len(self._positions))
        self._prefix = np.concatenate((self._prefix, np.zeros(size + 1 - len(self._prefix))))
        self._positions = np.concatenate((self._positions, np.zeros(size - len(self._positions), dtype=np.int64)))


class LiveAnswers:
    """The answer codes of one problem's live traces, as the score stage finds them (-1: no answer): the integer
    of `resolve_answer` under `answers:`, or for math answers the code of the trace's class of Math-Verify-equal
    boxed texts (answers.classes, with the problem's gold). A trace stopped early keeps its code; it never votes."""

    def __init__(self, answers: AnswersConfig, golds: Mapping[str, int | str], judge: MathJudge | None) -> None:
        self.answers = answers
        self.golds = golds
        self.judge = judge
        self.per_trace = judge is None  # an integer answer is the trace's own; a class code depends on the others

    def __call__(self, problem_id: str, traces: list[LiveTrace]) -> np.ndarray:
        return self.coded(problem_id, traces)[0]

    def coded(self, problem_id: str, traces: list[LiveTrace]) -> tuple[np.ndarray, int]:
        """The traces' codes and the gold answer's code (-1 when no trace's answer equals a math gold)."""
        gold = self.golds[problem_id]
        if self.judge is not None:
            boxed = [split_boxed_text(trace.sample.text, trace.sample.reasoning) for trace in traces]
            classes = answer_classes(str(gold), boxed, self.judge)
            right = np.flatnonzero(classes.correct)
            return classes.codes, int(classes.codes[right[0]]) if len(right) else -1
        resolved = (resolve_answer(split_candidates(t.sample.text, t.sample.reasoning), t.sample.finish_reason,
                                   self.answers)[0] for t in traces)
        return np.array([-1 if value is None else value for value in resolved], dtype=np.int64), int(gold)

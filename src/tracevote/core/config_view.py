"""params.yaml's `view:` section: what the explorer (`python -m tracevote view`, stage view) writes beyond the
problem tables: which traces of a pool get a trace page of their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracevote.core.config_deepconf import COUNT
from tracevote.core.typedconfig import param

Measure = Literal["avg", "bottom10", "lowest", "tail"]  # config_deepconf.MEASURES, the score table's columns
DEFAULT_TRACE_PAGES = 32  # per end: a paper-scale problem of 4,096 traces gets 64 pages, one chunk file


@dataclass(frozen=True)
class ViewConfig:
    trace_pages: int | None = param("per problem, the N most and N least confident traces (by trace_pages_by) get "
                                    "a trace page; a problem of at most 2N traces gets one for every trace; null: "
                                    "every trace of the pool. A live run's traces always get theirs",
                                    DEFAULT_TRACE_PAGES, **COUNT)
    trace_pages_by: Measure = param("the confidence measure (a column of the score table, as the problem page shows "
                                    "it) that ranks a problem's traces for trace_pages", "avg")


DEFAULT_VIEW = ViewConfig()

"""The spend guard: a build refused when its estimate is over the cap, and a run stopped before a call could take it
over (the arithmetic is tracevote.core.costs)."""

from __future__ import annotations

from collections.abc import Callable

from tracevote.core.costs import CostEstimate, money
from tracevote.core.errors import TracevoteError


class BudgetError(TracevoteError):
    """The estimated cost is over pool.max_cost_usd."""


class SpendCapError(TracevoteError):
    """A call's worst case would take the run over its cap: the run stopped sending."""


class SpendCap:
    """The run-time guard behind a max_cost_usd: a call starts only when what was spent, plus the worst case of
    every call in flight, plus its own worst case stays within the cap. Used from the runner's one thread."""

    def __init__(self, cap_usd: float, key: str, *, spent_usd: float = 0.0) -> None:
        self.cap_usd = cap_usd
        self.key = key
        self.spent_usd = spent_usd  # what the run paid before its calls (build_pool's probe)
        self.reserved_usd = 0.0
        self._reserved_calls = 0  # when none is in flight, nothing is reserved (not a float's residue)
        self._refused = (0.0, 0)  # the worst case of the call refused, and how many calls were not sent

    def reserve(self, worst_usd: float, not_sent: Callable[[], int]) -> None:
        """Hold `worst_usd` for a call about to start, or raise SpendCapError (`not_sent` counts what is left)."""
        if self.spent_usd + self.reserved_usd + worst_usd > self.cap_usd:
            self._refused = (worst_usd, not_sent())
            raise self.stopped()
        self.reserved_usd += worst_usd
        self._reserved_calls += 1

    def stopped(self) -> SpendCapError:
        """The error for a run the cap stopped, with what was spent so far (call it again once the calls in
        flight have landed, for the final figure)."""
        worst_usd, not_sent = self._refused
        in_flight = f" with {money(self.reserved_usd)} in flight" if self.reserved_usd else ""
        return SpendCapError(
            f"stopped at {self.key}: spent {money(self.spent_usd)} of {money(self.cap_usd)}{in_flight}, and the "
            f"next call could cost up to {money(worst_usd)}; {not_sent} calls not sent (replies received are "
            f"stored). Raise {self.key} in params.yaml and run the stage again: it requests only what is missing")

    def settle(self, worst_usd: float, paid_usd: float) -> None:
        """A call held at `worst_usd` came back (paid_usd spent) or failed (0)."""
        self._reserved_calls = max(0, self._reserved_calls - 1)
        self.reserved_usd = max(0.0, self.reserved_usd - worst_usd) if self._reserved_calls else 0.0
        self.spent_usd += paid_usd


def check_budget(cost: CostEstimate, max_cost_usd: float, *, cap: str = "pool.max_cost_usd",
                 levers: str = "pool.n_pool or decoding.max_tokens") -> None:
    """BudgetError when the estimate exceeds `max_cost_usd`, naming the `cap` key and what lowers the cost."""
    if cost.usd > max_cost_usd:
        raise BudgetError(
            f"refusing to build: the estimate is over {cap} ({money(max_cost_usd)}): {cost.render()}. "
            f"Raise {cap} in params.yaml (it is not a pipeline param, so changing it re-runs "
            f"nothing), or lower {levers}.")

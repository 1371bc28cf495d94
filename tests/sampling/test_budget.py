from __future__ import annotations

import pytest

from tracevote.core.config_endpoints import PricingConfig
from tracevote.sampling.budget import BudgetError, check_budget, estimate, money, spent_text

PRICES = PricingConfig(checked="2026-07", input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28,
                       expected_output_fraction=1.0)


@pytest.mark.parametrize(
    ("n_pool", "problems", "max_tokens", "expected_usd"),
    [
        (512, 30, 4096, 17.6),  # the default setting: about 63M output tokens
        (4096, 30, 4096, 141.0),  # paper scale: about 503M output tokens
        (64, 12, 1000, 0.231),
    ],
)
def test_estimate_is_dominated_by_output(n_pool: int, problems: int, max_tokens: int, expected_usd: float) -> None:
    cost = estimate([400] * (n_pool * problems), max_tokens, PRICES)
    assert cost.output_tokens == n_pool * problems * max_tokens
    assert cost.usd == pytest.approx(expected_usd, rel=0.02)
    assert cost.requests == n_pool * problems


def test_default_cap_refuses_paper_scale_and_says_how_to_raise() -> None:
    paper = estimate([400] * (4096 * 30), 4096, PRICES)
    with pytest.raises(BudgetError) as error:
        check_budget(paper, max_cost_usd=25.0)
    assert "pool.max_cost_usd ($25.00)" in str(error.value)
    assert "$14" in str(error.value)
    check_budget(estimate([400] * (512 * 30), 4096, PRICES), max_cost_usd=25.0)


@pytest.mark.parametrize(("simulated_as", "expected"), [
    (None, "~$0.4200"),
    ("deepseek-v4-flash",
     "cost if this were deepseek-v4-flash at list prices: ~$0.4200 (SIMULATED: nothing was spent)"),
])
def test_spent_text_marks_simulated_dollars_as_not_spent(simulated_as: str | None, expected: str) -> None:
    assert spent_text(0.42, simulated_as) == expected


def test_a_simulated_estimate_reads_as_what_a_real_run_would_cost() -> None:
    real = estimate([400] * 100, 1000, PRICES)
    simulated = estimate([400] * 100, 1000, PRICES, simulated_as="deepseek-v4-flash")
    assert simulated.usd == real.usd
    assert "SIMULATED" not in real.render() and real.render().endswith(f"~{money(real.usd)} (prices checked 2026-07)")
    assert simulated.render().endswith(f"cost if this were deepseek-v4-flash at list prices (checked 2026-07): "
                                       f"~{money(real.usd)} (SIMULATED: nothing will be spent)")

"""A reply whose whole budget went to hidden reasoning: empty content, finish_reason "length", and the completion
tokens all reasoning (OpenAI's usage.completion_tokens_details.reasoning_tokens). It is an error, never an answer:

    endpoints.gpt-5-nano (gpt-5-nano) spent the whole budget of 512 tokens (grading.critic.max_tokens) on hidden
    reasoning at reasoning_effort medium (the model's default: endpoints.gpt-5-nano.reasoning_effort is null) and
    answered nothing (call critic-1f.../0); that reply cost $0.000207 (512 output tokens) and is not kept (against
    the simulator: "that reply would cost $... at list prices (SIMULATED: nothing was spent)"). Raise
    grading.critic.max_tokens or set endpoints.gpt-5-nano.reasoning_effort lower (minimal or low), then run again:
    it asks again. The run stopped here: every reply at this setting would end the same way.

A server that reports no reasoning tokens (vLLM serving gpt-oss) is judged by the endpoint's reasoning_effort: set,
an empty reply cut for length is the same error.
"""

from __future__ import annotations

from tracevote.core.config_endpoints import PROFILE_EFFORTS, ModelConfig
from tracevote.core.costs import usd_cached
from tracevote.core.errors import ReasoningBudgetError
from tracevote.sampling.ingest import Reply

DEFAULT_EFFORT = "medium"  # OpenAI's reasoning models before gpt-5.1, and gpt-oss, when none is sent


def all_reasoning(reply: Reply, model: ModelConfig) -> bool:
    """Whether `reply` answered nothing because its budget went to hidden reasoning."""
    if reply.text.strip() or reply.finish_reason != "length" or reply.completion_tokens == 0:
        return False
    reported = reply.reasoning_tokens >= reply.completion_tokens
    return reported or (model.reasoning_effort is not None and not model.profile.reasoning_tokens)


def check_answered(reply: Reply, model: ModelConfig, *, budget: int, settings: str, call_key: str) -> None:
    """ReasoningBudgetError (see the module's docstring) for a reply all_reasoning finds; else nothing."""
    if all_reasoning(reply, model):
        raise ReasoningBudgetError(budget_message(reply, model, budget=budget, settings=settings, call_key=call_key))


def budget_message(reply: Reply, model: ModelConfig, *, budget: int, settings: str, call_key: str) -> str:
    where = f"endpoints.{model.endpoint}"
    effort = (f"reasoning_effort {model.reasoning_effort}" if model.reasoning_effort is not None else
              f"reasoning_effort {DEFAULT_EFFORT} (the model's default: {where}.reasoning_effort is null)")
    pricing = model.pricing
    cost = ("an unpriced amount" if pricing is None else
            f"${usd_cached(reply.prompt_tokens, reply.cached_prompt_tokens, reply.completion_tokens, pricing):.6f}")
    spent = (f"that reply would cost {cost} at list prices (SIMULATED: nothing was spent)" if reply.simulated else
             f"that reply cost {cost}")
    return (f"{where} ({model.name}) spent the whole budget of {budget} tokens ({settings}.max_tokens) on hidden "
            f"reasoning at {effort} and answered nothing (call {call_key}); {spent} "
            f"({reply.completion_tokens} output tokens) and is not kept. Raise {settings}.max_tokens "
            f"{effort_lever(model)}, then run again: it asks again. The run stopped here: every reply at this "
            f"setting would end the same way")


def effort_lever(model: ModelConfig) -> str:
    """The other way out: "or set endpoints.gpt-5-nano.reasoning_effort lower (minimal or low)" at medium, the two
    efforts just below the endpoint's that its profile takes; at the lowest, that there is none."""
    where = f"endpoints.{model.endpoint}.reasoning_effort"
    takes = PROFILE_EFFORTS.get(model.profile.name, ())
    effort = model.reasoning_effort or DEFAULT_EFFORT
    below = takes[: takes.index(effort)] if effort in takes else ()
    if not below:
        return f"({where} is already {effort}, the lowest it takes)"
    return f"or set {where} lower ({' or '.join(below[-2:])})"

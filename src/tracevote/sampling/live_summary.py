"""What a live run did (tracevote.sampling.live): traces started and stored by how they ended, tokens received,
kept and billed, dollars, broken stream attempts and failures, in the lines the stage prints."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from tracevote.core.costs import spent_text
from tracevote.store.live import LiveTrace


@dataclass
class LiveSummary:
    """What a run did: traces stored by how they ended, tokens received and billed, dollars, failures."""

    started: int = 0
    stored: int = 0
    by_reason: collections.Counter[str] = field(default_factory=collections.Counter)
    received_tokens: int = 0
    kept_tokens: int = 0
    billed_completion: int = 0
    counted_by_client: int = 0  # billed completion tokens counted by the client (the server sent no usage)
    prompts_estimated: int = 0  # traces without the server's usage: their prompt priced as the spend guard does
    usd: float = 0.0
    broken_attempts: int = 0  # stream attempts that broke after tokens arrived (each asked again, or given up on)
    broken_tokens: int = 0  # tokens received on them (billed, counted by the client)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    elapsed_s: float = 0.0
    simulated_as: str | None = None

    def add(self, trace: LiveTrace, paid_usd: float) -> None:
        self.stored += 1
        self.by_reason[trace.stop_reason] += 1
        self.received_tokens += trace.received
        self.kept_tokens += trace.sample.n_tokens
        self.billed_completion += trace.completion_tokens
        self.counted_by_client += trace.completion_tokens if trace.usage_source == "client" else 0
        self.prompts_estimated += trace.prompt_tokens is None
        self.usd += paid_usd

    def render(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.by_reason.items())) or "none"
        lines = [f"stored {self.stored} of {self.started} traces started in {self.elapsed_s:.1f}s ({reasons}); "
                 f"{self.received_tokens} completion tokens received, {self.kept_tokens} kept; billed "
                 f"{self.billed_completion} completion tokens ({self.counted_by_client} counted by the client: the "
                 f"server sent no usage), {spent_text(self.usd, self.simulated_as)}"
                 + (f" (the prompts of {self.prompts_estimated} traces without usage estimated as the spend guard "
                    f"does)" if self.prompts_estimated else "")]
        if self.broken_attempts:
            lines.append(f"  {self.broken_attempts} stream attempts broke after tokens arrived, each asked again "
                         f"from its start: the {self.broken_tokens} tokens received on them are billed above (counted "
                         f"by the client)")
        lines += [f"  failed: {count} x {cause}" for cause, count in self.failures.most_common()]
        return "\n".join(lines)

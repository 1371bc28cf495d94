"""Backends turn messages into sampled traces: an OpenAI-compatible server over HTTP, or the simulator.

Both go through the same client, ingestion and probe: the in-process simulator is served on a
loopback port for the duration of the build, so the demo exercises exactly the real code path.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.config import Params
from tracevote.core.config_deepconf import DecodingConfig, PoolConfig
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.errors import ModelNotFoundError, TracevoteError
from tracevote.core.retry import RetryNotice, TransientError
from tracevote.datasets.problems import Problem
from tracevote.sampling.apikey import resolve_api_key
from tracevote.sampling.build import Sampled

if TYPE_CHECKING:  # the HTTP client and the simulator load where a client opens: a stage that refuses first, or
    # finds nothing missing, never pays their ~0.3 CPU s of imports
    from tracevote.sampling.client import ChatClient
    from tracevote.sampling.probe import ProbeReport


@dataclass
class Sampler:
    """A configured client plus what the build needs from it: samples, a probe, retry counts."""

    client: ChatClient
    keep_top_logprobs: bool
    keep_raw: bool
    keep_top_tokens: bool = False  # the alternatives' token strings, where the engine sends them (pool.keep_top_tokens)

    def sample(self, messages: list[dict[str, str]], problem_id: str, sample_id: int) -> Sampled:
        sample, raw = self.client.sample_with_body(messages, problem_id=problem_id, sample_id=sample_id,
                                                   keep_top_logprobs=self.keep_top_logprobs,
                                                   keep_top_tokens=self.keep_top_tokens)
        return Sampled(sample, raw.body if self.keep_raw else None, raw.simulated)

    def sample_many(self, messages: list[dict[str, str]], problem_id: str,
                    sample_ids: list[int]) -> dict[int, Sampled | TransientError]:
        """One request for len(sample_ids) traces (`n`); a kept raw response is the reply with that choice only
        (a trace kept from a cut reply keeps none)."""
        from tracevote.sampling.choices import one_choice_bodies, sample_choices

        outcomes, raw, raw_ids = sample_choices(self.client, messages, problem_id=problem_id,
                                                sample_ids=sample_ids, keep_top_logprobs=self.keep_top_logprobs,
                                                keep_top_tokens=self.keep_top_tokens)
        bodies = one_choice_bodies(raw.body, raw_ids) if self.keep_raw and raw_ids else {}
        return {sid: got if isinstance(got, TransientError) else Sampled(got, bodies.get(sid), raw.simulated)
                for sid, got in outcomes.items()}

    def probe(self) -> ProbeReport:
        from tracevote.sampling.probe import run_probe

        return run_probe(self.client)

    def retry_report(self) -> str:
        return retry_report(self.client)


def retry_report(client: ChatClient) -> str:
    """"retries: none", or the retried failures by cause; then, with several endpoints, how each fared."""
    retries = client.retries.snapshot()
    line = ("retries by cause: " + ", ".join(f"{cause} {count}" for cause, count in sorted(retries.items()))
            if retries else "retries: none")
    if len(client.endpoints) == 1:
        return line
    return f"{line}\nendpoints:\n{client.endpoints.render()}"


@contextlib.contextmanager
def open_client(model: ModelConfig, decoding: DecodingConfig, problems: list[Problem], api_key: str | None, *,
                pool: PoolConfig, concurrency: int, first_errors: Mapping[str, int] | None = None,
                reached: Mapping[str, bool] | None = None, on_retry: Callable[[RetryNotice], None] | None = None,
                settings: str = "decoding") -> Iterator[ChatClient]:
    """A ChatClient for `model` with `decoding`, timeouts and retries from `pool`, `concurrency` requests in
    flight per endpoint (callers size their workers by `client.capacity`); for the simulator, a loopback server
    (knowing `problems`' answers, the solutions' `first_errors` and whether reasonings `reached` their gold,
    see SimModel) runs while the block does. `on_retry` hears of every retried failure (the entry point shows it).
    `settings` names the params.yaml section `decoding` was made from (debate, grading.critic), for error hints."""
    from tracevote.sampling.client import ChatClient

    with contextlib.ExitStack() as stack:
        if model.backend == "sim":
            base_url = stack.enter_context(_simulator(model, problems, first_errors, reached))
            model = _pointed_at(model, base_url)
        client = ChatClient(model, decoding, api_key=api_key, timeout_s=pool.request_timeout_s,
                            max_retries=pool.max_retries, concurrency=concurrency, on_retry=on_retry,
                            settings=settings)
        stack.callback(client.close)
        yield client


@contextlib.contextmanager
def open_sampler(params: Params, problems: list[Problem], api_key: str | None,
                 on_retry: Callable[[RetryNotice], None] | None = None,
                 model: ModelConfig | None = None) -> Iterator[Sampler]:
    """A Sampler for DeepConf's `model` (default: deepconf.endpoint's) and params.decoding (see open_client)."""
    with open_client(model or params.deepconf_model, params.decoding, problems, api_key, pool=params.pool,
                     concurrency=params.pool.concurrency, on_retry=on_retry) as client:
        yield Sampler(client, params.pool.keep_top_logprobs, params.pool.keep_raw, params.pool.keep_top_tokens)


def _simulator(model: ModelConfig, problems: list[Problem], first_errors: Mapping[str, int] | None,
               reached: Mapping[str, bool] | None) -> contextlib.AbstractContextManager[str]:
    """A loopback simulated server for `model`'s profile."""
    from tracevote.sim.model import SimModel
    from tracevote.sim.server import ServerOptions, running_server

    sim = SimModel(model.sim, answers={p.problem: p.answer for p in problems}, first_errors=first_errors,
                   reached=reached)
    return running_server(sim, options=ServerOptions(profile=model.profile.name,
                                                     context_window=model.context_window))


def _pointed_at(model: ModelConfig, base_url: str) -> ModelConfig:
    return dataclasses.replace(model, base_url=base_url, needs_key=False)


def api_key_for(model: ModelConfig, environ: Mapping[str, str], dotenv: Path, *, missing: int,
                what: str = "samples", stage: str = "build_pool") -> str | None:
    """The API key, or a clear error when the endpoint needs one and calls are missing."""
    if model.backend == "sim" or not model.needs_key:
        return None  # a server that needs no key is sent none, whatever the environment holds
    key = resolve_api_key(model, environ, dotenv if dotenv.is_file() else None)
    if key is None:
        raise TracevoteError(
            f"{f'{missing} {what} are missing and ' if missing else ''}no API key is set for endpoint "
            f"{model.endpoint} ({model.name}): looked in the environment (${model.api_key_env} "
            f"{'empty' if model.api_key_env in environ else 'not set'}) and in {dotenv.absolute()} "
            f"({'no ' + model.api_key_env + ' in it' if dotenv.is_file() else 'no such file'}). "
            f"{_where_to_put_the_key(model, dotenv)} If a teammate has run {stage}, fetch its outputs instead with "
            f"`dvc pull` (or `make repro`, which pulls before it runs anything). A local server that needs no key: "
            f"set endpoints.{model.endpoint}.needs_key: false.")
    return key


def dvc_temp_workspace(folder: Path) -> Path | None:
    """The project whose DVC temporary workspace `folder` is (`dvc exp run --queue` or `--temp` run stages in
    <project>/.dvc/tmp/exps/<tmp>/, a checkout of the commit holding only git-tracked files), else None."""
    parts = folder.absolute().parts
    for i in range(len(parts) - 3):
        if parts[i:i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return None


def _where_to_put_the_key(model: ModelConfig, dotenv: Path) -> str:
    project = dvc_temp_workspace(dotenv.absolute().parent)
    if project is None:
        return f"Export {model.api_key_env}=... or put it in .env (git-ignored)."
    return (f"This stage runs in a DVC temporary workspace (dvc exp run --queue or --temp), which holds only "
            f"git-tracked files, so {project / '.env'} is not here: queue with `dvc exp run --queue --copy-paths "
            f".env ...` (DVC copies it in), or export {model.api_key_env}=... in the shell that runs "
            f"`dvc queue start` (or `dvc exp run --temp`).")


def refuse_if_uninformative(report: ProbeReport, allow: bool) -> None:
    """ModelNotFoundError when the server lacks the model (DeepSeek: HTTP 400 "Model Not Exist"), whatever `allow`
    says; otherwise an error when the logprobs carry no signal, unless `allow`."""
    if not report.model_found:
        raise ModelNotFoundError(report.problems[0], 0)
    if report.informative or allow:
        return
    reasons = "\n  ".join(report.problems)
    raise TracevoteError(f"the probe found no usable confidence signal in the endpoint's logprobs:\n  {reasons}\n"
                         f"Nothing was built. To build anyway, set pool.allow_uninformative_logprobs: true.")

"""Typed, frozen views of params.yaml, validated once where the file is read.

Every section is a frozen dataclass (one module per group of sections: config_datasets, config_endpoints,
config_deepconf, config_methods), so anything derived from a config can be cached on it. This module holds the
root, the checks across sections, and load_params, which reports every missing key, unknown key and bad value
of the file in one error, one line each naming the key and the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracevote.core.config_datasets import INTEGER_FORMATS, KEY_NAME_PATTERN, AnswersConfig, DatasetConfig
from tracevote.core.config_deepconf import (
    ConfidenceConfig,
    DecodingConfig,
    DeepConfConfig,
    EvalConfig,
    OnlineConfig,
    PoolConfig,
    PromptConfig,
    ReportConfig,
)
from tracevote.core.config_endpoints import NO_SIM_KEY, BackendConfig, EndpointConfig, ModelConfig
from tracevote.core.config_methods import CritiqueConfig, DebateConfig, GradingConfig
from tracevote.core.config_study import NO_STUDY, StudyConfig
from tracevote.core.config_view import DEFAULT_VIEW, ViewConfig
from tracevote.core.errors import ConfigError
from tracevote.core.inputs import local_sources, output_sources
from tracevote.core.params_yaml import read_params_yaml
from tracevote.core.profiles import DEFAULT_TEMPERATURE
from tracevote.core.typedconfig import INVALID, Problem, build, collecting, param, report, require


@dataclass(frozen=True)
class Params:
    datasets: dict[str, DatasetConfig] = param("every dataset the project knows, by name: fetch and normalize run "
                                               "once per entry; each method names the ones it runs on",
                                               keys=KEY_NAME_PATTERN)
    deepconf: DeepConfConfig = param("DeepConf: confidence-filtered voting over a pool of sampled traces")
    debate: DebateConfig = param("DyLAN-style multi-agent debate")
    critique: CritiqueConfig = param("ProcessBench-style first-error identification")
    grading: GradingConfig = param("grading prediction files and pools: Math-Verify accuracy, word counts and an "
                                   "optional LLM critic")
    model: BackendConfig = param("who answers every endpoint's calls: its own servers, or the simulated model")
    endpoints: dict[str, EndpointConfig] = param("named endpoints: a model on one or more servers of one provider; "
                                                 "each method names the one it calls", keys=KEY_NAME_PATTERN)
    prompt: PromptConfig = param("the messages the pool's traces answer")
    decoding: DecodingConfig = param("how the pool's traces are sampled")
    pool: PoolConfig = param("the pool of traces per problem and how it is built")
    confidence: ConfidenceConfig = param("DeepConf's confidence measures over each trace's token windows")
    answers: AnswersConfig = param("where a trace without a boxed answer may still get one")
    eval: EvalConfig = param("voting at each working-set size K")
    online: OnlineConfig = param("online DeepConf replayed on the pool, at every eval.k >= warmup")
    report: ReportConfig = param("the report's headline K")
    study: StudyConfig = param("the study report: every DeepConf model of a dataset in one table, in dollars, "
                               "compared on the same problems (stage study@<dataset>)", NO_STUDY)
    view: ViewConfig = param("the explorer (stage view): which traces get a trace page", DEFAULT_VIEW)

    def dataset(self, name: str) -> DatasetConfig:
        """The `datasets:` entry `name`, or a ConfigError listing the names there are."""
        if name not in self.datasets:
            raise ConfigError(f"datasets: no dataset {name!r} (there are: {', '.join(self.datasets) or 'none'})")
        return self.datasets[name]

    def endpoint_model(self, key: str) -> ModelConfig:
        """Endpoint `key` of `endpoints:` as a method calls it, answered as `model.backend` says."""
        endpoint = self.endpoints[key]
        return ModelConfig(backend=self.model.backend, base_url=endpoint.base_url, name=endpoint.name,
                           extra_body=endpoint.extra_body, api_key_env=endpoint.api_key_env,
                           needs_key=endpoint.needs_key, sim=self.model.sim, profile=endpoint.resolved_profile(),
                           pricing=endpoint.pricing, context_window=endpoint.context_window, endpoint=key,
                           allow_foreign_key=endpoint.allow_foreign_key, profile_why=endpoint.profile_why(),
                           reasoning_effort=endpoint.reasoning_effort)

    @property
    def deepconf_model(self) -> ModelConfig:
        return self.endpoint_model(self.deepconf.endpoint)

    def study_model(self, key: str) -> ModelConfig:
        """One of deepconf.endpoints as DeepConf calls it: simulated (when model.backend is sim) by model.sim with
        its own `sim:` keys replaced. (deepconf.endpoint has none: validate refuses one, and model.sim is its.)"""
        model = self.endpoint_model(key)
        override = self.endpoints[key].sim
        if override is None or override is NO_SIM_KEY:
            return model
        return dataclasses.replace(model, sim=override.applied_to(self.model.sim))

    @property
    def debate_model(self) -> ModelConfig:
        return self.endpoint_model(self.debate.endpoint)

    @property
    def judge_model(self) -> ModelConfig:
        return self.endpoint_model(self.debate.judge_endpoint)

    @property
    def critique_model(self) -> ModelConfig:
        return self.endpoint_model(self.critique.endpoint)

    @property
    def critic_model(self) -> ModelConfig:
        return self.endpoint_model(self.grading.critic.endpoint)

    def validate(self, where: str) -> None:
        require(len(self.datasets) > 0, where, "datasets", self.datasets, "at least one dataset")
        self._check_dataset_kinds()
        if self._check_endpoint_names():
            self._check_profiles()
            self._check_study_models()
        self._check_ks()
        self._check_study()
        self._check_token_signal()

    def study_models(self) -> tuple[str, ...]:
        """The endpoints a study compares: deepconf.endpoint first, then deepconf.endpoints."""
        return (self.deepconf.endpoint, *self.deepconf.endpoints)

    def _check_study(self) -> None:
        """The study's datasets are DeepConf's, its K eval's and its reference one of the models it compares; a study
        compares at least two models (its stage depends on the others' folder, study/, which one model lacks)."""
        if self.study.datasets:
            require(len(self.deepconf.endpoints) > 0, "deepconf", "endpoints", [],
                    f"at least one model beside deepconf.endpoint when study.datasets names any "
                    f"({list(self.study.datasets)}): a study compares models")
        for name in self.study.datasets:
            require(name in self.deepconf.datasets, "study", "datasets", name,
                    f"one of deepconf.datasets {list(self.deepconf.datasets)} (the study reads their aggregates)")
        for k in self.study.k:
            require(k in self.eval.k, "study", "k", k, f"one of eval.k {list(self.eval.k)}")
        models = self.study_models()
        if self.study.reference is not None:
            require(self.study.reference in models, "study", "reference", self.study.reference,
                    f"one of the models the study compares ({', '.join(models)}), or null")

    def _check_token_signal(self) -> None:
        """confidence.top_k within the top-k the pool asks for, and a signal that needs the top-k only from a pool
        that keeps it (deepconf at the pool's own k reads the stored C_i)."""
        top_k, asked, token = self.confidence.top_k, self.decoding.top_logprobs, self.confidence.token
        if top_k is not None:
            require(top_k <= asked, "confidence", "top_k", top_k,
                    f"at most decoding.top_logprobs ({asked}), the top-k the pool holds; or null")
        own_k = token == "deepconf" and top_k in (None, asked)
        if not self.pool.keep_top_logprobs and token != "chosen" and not own_k:
            require(False, "confidence", "token", token,
                    f"chosen, or deepconf with top_k null: {token} at top_k {'null' if top_k is None else top_k} "
                    "needs the top-k logprobs, which pool.keep_top_logprobs: false does not keep")

    def _check_ks(self) -> None:
        """Every K within the pool. A shrunken pool.n_pool invalidates eval.k and report.k at once: both are
        reported in one run, report.k with the values that would fit, so one edit mends both."""
        n_pool = self.pool.n_pool
        too_large = [k for k in self.eval.k if k > n_pool]
        require(not too_large, "eval", "k", too_large, f"at most pool.n_pool ({n_pool})")
        if self.report.k > n_pool:
            fits = [k for k in self.eval.k if k <= n_pool]
            require(False, "report", "k", self.report.k,
                    f"at most pool.n_pool ({n_pool}) and one of eval.k ({fits or 'none fits'})")
        else:
            require(self.report.k in self.eval.k, "report", "k", self.report.k, f"one of eval.k {list(self.eval.k)}")

    def _check_dataset_kinds(self) -> None:
        """Each method's datasets are known and of the kind it reads."""
        known = f"a key of datasets: ({', '.join(self.datasets) or 'none defined'})"
        for method, names, formats, why in (
                ("deepconf", self.deepconf.datasets, (*INTEGER_FORMATS, "math"),
                 "DeepConf votes over integers, or over classes of equal LaTeX answers"),
                ("online.live", self.online.live.datasets, (*INTEGER_FORMATS, "math"),
                 "DeepConf votes over integers, or over classes of equal LaTeX answers"),
                ("debate", self.debate.datasets, INTEGER_FORMATS, "agents agree on integers")):
            for name in names:
                if require(name in self.datasets, method, "datasets", name, known):
                    dataset = self.datasets[name]
                    wanted = "integer or math answers" if "math" in formats else "integer answers"
                    require(dataset.kind == "problems" and dataset.answer_format in formats, method,
                            "datasets", name, f"a dataset of problems with {wanted} ({why}; "
                            f"{name} is kind {dataset.kind}, answer_format {dataset.answer_format})")
        self._check_pool_sources(known)
        for name in self.critique.datasets:
            if require(name in self.datasets, "critique", "datasets", name, known):
                kind = self.datasets[name].kind
                require(kind == "steps", "critique", "datasets", name,
                        f"a dataset of kind steps (solutions with a labelled first error; {name} is kind {kind})")
        for run in self.grading.runs.values():
            where = f"grading.runs.{run.name}"
            if require(run.dataset in self.datasets, where, "dataset", run.dataset, known):
                kind = self.datasets[run.dataset].kind
                require(kind == "problems", where, "dataset", run.dataset,
                        f"a dataset of kind problems (its normalized file is the gold; {run.dataset} is kind {kind})")

    def _check_pool_sources(self, known: str) -> None:
        """A dataset made of a pool's traces is of kind steps, and its pool a dataset of problems read from a file or
        the hub (whether the rows carry the generator's steps is checked where they are read: datasets.pool_steps)."""
        for name, dataset in self.datasets.items():
            pool = dataset.source.pool
            if pool is None:
                continue
            where = f"datasets.{name}"
            require(dataset.kind == "steps", where, "kind", dataset.kind,
                    f"steps: source.pool ({pool}) makes solutions labelled with their first wrong step")
            if not require(pool in self.datasets and pool != name, f"{where}.source", "pool", pool,
                           f"{known}, other than {name} itself"):
                continue
            source = self.datasets[pool]
            require(source.kind == "problems" and source.source.pool is None, f"{where}.source", "pool", pool,
                    f"a dataset of kind problems read from a file or the hub, whose DeepConf pool holds the traces "
                    f"({pool} is kind {source.kind}" + (f", itself made of pool {source.source.pool})"
                                                        if source.source.pool else ")"))

    def _endpoint_uses(self) -> list[tuple[str, str, str]]:
        """(section, key, endpoint) for every endpoint a method names."""
        return [("deepconf", "endpoint", self.deepconf.endpoint),
                *(("deepconf", f"endpoints[{i}]", key) for i, key in enumerate(self.deepconf.endpoints)),
                ("debate", "endpoint", self.debate.endpoint), ("debate", "judge_endpoint", self.debate.judge_endpoint),
                ("critique", "endpoint", self.critique.endpoint),
                ("grading.critic", "endpoint", self.grading.critic.endpoint)]

    def _check_endpoint_names(self) -> bool:
        known = f"a key of endpoints: ({', '.join(self.endpoints) or 'none defined'})"
        return all([require(endpoint in self.endpoints, section, key, endpoint, known)
                    for section, key, endpoint in self._endpoint_uses()])

    def _check_pool_profile(self, key: str, where: str) -> None:
        """DeepConf's model `key` (named at deepconf.<where>) returns logprobs, as many as decoding.top_logprobs."""
        pool = self.endpoints[key]
        profile = pool.resolved_profile()
        require(profile.logprobs, "deepconf", where, key,
                f"an endpoint that returns logprobs: DeepConf's confidence is made of them, and "
                f"{pool.name} (profile {profile.name}) returns none")
        limit = profile.max_top_logprobs or 0
        require(self.decoding.top_logprobs <= limit, "decoding", "top_logprobs", self.decoding.top_logprobs,
                f"at most {limit}, the most {pool.name} (endpoint {key}, profile {profile.name}) returns")

    def _check_study_models(self) -> None:
        """deepconf.endpoints lists only the other models, each with a sim: key (its stages declare it); a sim
        override anywhere else would be read by no stage."""
        for i, key in enumerate(self.deepconf.endpoints):
            require(key != self.deepconf.endpoint, "deepconf", f"endpoints[{i}]", key,
                    f"another model than deepconf.endpoint ({key} is it): list only the other models")
            if self.endpoints[key].sim is NO_SIM_KEY:
                report(f"endpoints.{key}.sim", f"missing: a model of deepconf.endpoints needs it even when "
                       f"model.backend is {self.model.backend} (its DeepConf stages declare it, and DVC refuses a "
                       "declared param that is missing): add `sim: null` (model.sim as it is) or the keys of "
                       "model.sim to replace, e.g. {accuracy: 0.3}")
        self._check_stage_names()
        for key, endpoint in self.endpoints.items():
            if key in self.deepconf.endpoints and key != self.deepconf.endpoint:
                continue
            require(endpoint.sim is None or endpoint.sim is NO_SIM_KEY, f"endpoints.{key}", "sim",
                    dataclasses.asdict(endpoint.sim) if endpoint.sim else None,
                    "null or absent: only a model of deepconf.endpoints has its own simulated model (model.sim "
                    "simulates every other endpoint)")

    def _check_stage_names(self) -> None:
        """DVC names a study stage <dataset>-<endpoint>: names with '-' may meet (a-b + c, a + b-c), and of two
        matrix instances of one name DVC keeps the last without a word (checked with DVC 3.67): a pool never built."""
        seen: dict[str, tuple[str, str]] = {}
        for dataset in self.deepconf.datasets:
            for endpoint in self.deepconf.endpoints:
                other = seen.setdefault(f"{dataset}-{endpoint}", (dataset, endpoint))
                require(other == (dataset, endpoint), "deepconf", "endpoints", list(self.deepconf.endpoints),
                        f"models whose stage names differ: dataset {dataset} with endpoint {endpoint} and dataset "
                        f"{other[0]} with endpoint {other[1]} are both build_pool_model@{dataset}-{endpoint} "
                        f"(rename one endpoint)")

    def _check_profiles(self) -> None:
        """What a method needs of its endpoint's provider, refused here, before any request."""
        self._check_pool_profile(self.deepconf.endpoint, "endpoint")
        for i, key in enumerate(self.deepconf.endpoints):
            self._check_pool_profile(key, f"endpoints[{i}]")
        temperatures = [("decoding", self.decoding.temperature, self.deepconf.endpoint),
                        *(("decoding", self.decoding.temperature, key) for key in self.deepconf.endpoints),
                        ("debate", self.debate.temperature, self.debate.endpoint),
                        ("debate", self.debate.temperature, self.debate.judge_endpoint),
                        ("critique", self.critique.temperature, self.critique.endpoint)]
        if self.grading.critic.enabled:
            temperatures.append(("grading.critic", self.grading.critic.temperature, self.grading.critic.endpoint))
        refused: set[tuple[str, str]] = set()
        for section, temperature, key in temperatures:
            endpoint = self.endpoints[key]
            profile = endpoint.resolved_profile()
            if profile.sampling_parameters or temperature == DEFAULT_TEMPERATURE or (section, key) in refused:
                continue
            refused.add((section, key))
            require(False, section, "temperature", temperature,
                    f"{DEFAULT_TEMPERATURE:g}: endpoint {key} ({endpoint.name}, profile {profile.name}) accepts only "
                    f"the default temperature; set {section}.temperature: {DEFAULT_TEMPERATURE:g}")


# What the running stage declares in dvc.yaml, asked only when the file has a problem (the answer takes DVC a
# second): the entry point sets it (tracevote.core.entry); unset, or None from it, every problem is the caller's.
DeclaredKeys = Callable[[], Collection[str] | None]
_DECLARED: ContextVar[DeclaredKeys | None] = ContextVar("declared_params", default=None)


@contextmanager
def stage_declaring(keys: DeclaredKeys) -> Iterator[None]:
    """Within the block, load_params fails only on problems with the keys `keys()` names, listing the others
    after them; keys() returning None (a stage declaring no params) keeps every problem."""
    token = _DECLARED.set(keys)
    try:
        yield
    finally:
        _DECLARED.reset(token)


def check_params(path: str | Path = "params.yaml", root: Path | None = None) -> Params:
    """params.yaml with every problem of the whole file refused, whichever stage runs: the check_params stage
    and every paid stage (build_pool and build_pool_model, build_online, build_debate, build_critiques,
    build_grading_critic) call it before any
    request, so a typo anywhere (`debate.agnets`, `pool.n_poll`) or a bad endpoint never pays with a default.
    A local source that a stage of the project at `root` (the working directory) would write over comes first."""
    path = Path(path)
    raw = read_params_yaml(path)  # parsed once: its datasets' local sources, then every key
    clashing = output_sources(local_sources(raw), Path.cwd() if root is None else root, path)
    try:
        with stage_declaring(lambda: None):
            params = params_of(raw, path)
    except ConfigError as exc:
        raise ConfigError("\n".join([*clashing, str(exc)])) from None
    if clashing:
        raise ConfigError("\n".join(clashing))
    return params


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml; one error lists every problem, one line each naming the key and value.
    Under an offline stage (stage_declaring), only the problems of its own keys stop it (see check_params)."""
    path = Path(path)
    return params_of(read_params_yaml(path), path)


def params_of(raw: Any, path: Path) -> Params:
    """load_params of the YAML `raw` already read from `path` (read_params_yaml), for a caller that also reads it as
    plain YAML first (its local sources: tracevote.core.inputs); problems name `path`."""
    with collecting() as problems:
        params = build(Params, {} if raw is None else raw, "")
    if not problems:
        return params
    keys = _DECLARED.get()
    declared = None if keys is None else keys()
    owned = problems if declared is None else [problem for problem in problems if owns_problem(declared, problem)]
    if owned:
        raise ConfigError(problems_message(path, owned, [problem for problem in problems if problem not in owned]))
    if params is INVALID:  # subtle: a key of another stage that cannot be read leaves no Params to run with
        raise ConfigError(problems_message(path, problems, []))
    return params


def owns_problem(declared: Collection[str], problem: Problem) -> bool:
    """A stage owns a problem with one of its keys, and an unknown key nearest to one of its keys (a typo of
    what it reads: `debate.agnets` is compare's, which declares debate.agents)."""
    return owns(declared, problem.key) or (problem.meant is not None and owns(declared, problem.meant))


def owns(declared: Collection[str], key: str) -> bool:
    """Whether a problem with `key` touches one of the declared params paths (either contains the other):
    owns(["eval"], "eval.k[0]") and owns(["datasets.x.source"], "datasets") hold; owns(["eval"], "report.k") not."""
    parts = key.replace("[", ".[").split(".")
    for declared_key in declared:
        wanted = declared_key.split(".")
        common = min(len(parts), len(wanted))
        if parts[:common] == wanted[:common]:
            return True
    return False


def problems_message(path: Path, problems: list[Problem], elsewhere: list[Problem]) -> str:
    """`<path>: <key>: <problem>`, one line each; the problems of keys the stage does not read follow."""
    lines = [f"{path}: {problem}" for problem in problems]
    if elsewhere:
        lines.append(f"{path} also has problems in keys this stage does not read (the stages that read them fail "
                     f"on them; `dvc repro check_params` lists them all):")
        lines.extend(f"  {problem}" for problem in elsewhere)
    return "\n".join(lines)

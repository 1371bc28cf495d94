"""params.schema.json and the params reference: generated from the config classes, committed in step with
them, and agreeing with check_params on the project's params files and on wrong values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, committed_params_text
from tests.core.test_config import DELETE, params_with
from tests.dvcproject import one_dataset
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import BUILTIN_PROBLEMS, demo_overrides, with_overrides
from tracevote.core.config import Params, load_params
from tracevote.core.errors import ConfigError
from tracevote.core.params_docs import ENTRY, reference_markdown
from tracevote.core.params_schema import SCHEMA_FILE, params_schema, schema_text
from tracevote.core.typedconfig import config_fields

COMMITTED = REPO_ROOT / SCHEMA_FILE
REGENERATE = "python -m tracevote params schema"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(COMMITTED.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_schema_is_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == schema_text(), (
        f"{SCHEMA_FILE} is out of step with the config classes: run `{REGENERATE}` and commit it")


def test_params_yaml_names_the_schema_on_its_first_line() -> None:
    first = committed_params_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema={SCHEMA_FILE}"


def demo_params() -> dict[str, Any]:
    repository = yaml.safe_load(committed_params_text())
    return with_overrides(repository, demo_overrides(BUILTIN_PROBLEMS, problem_key="problem"))


def project_params(tmp_path: Path) -> dict[str, Any]:
    fixture = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    return with_overrides(fixture, {**small_sim_params(), **one_dataset("toy", tmp_path / "toy.jsonl")})


@pytest.mark.parametrize("name", ["params.yaml", "fixture", "demo", "test project"])
def test_the_project_params_files_validate(validator: jsonschema.Draft202012Validator, tmp_path: Path,
                                           name: str) -> None:
    params = {"params.yaml": lambda: yaml.safe_load(committed_params_text()),
              "fixture": lambda: yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8")),
              "demo": demo_params, "test project": lambda: project_params(tmp_path)}[name]()
    assert [error.message for error in validator.iter_errors(params)] == []


# (key, wrong value, what check_params says): the schema flags each as well
WRONG = [
    ("pool.concurency", 4, "pool.concurency: unknown key"),
    ("evall", {"k": [1]}, "evall: unknown key"),
    ("eval.seed", DELETE, "eval.seed: missing"),
    ("decoding.temperature", "hot", "decoding.temperature: expected a number, got 'hot'"),
    ("decoding.temperature", 2.5, "decoding.temperature: 2.5 must be in [0, 2]"),
    ("decoding.top_p", 0, "decoding.top_p: 0.0 must be in (0, 1]"),
    ("decoding.max_tokens", 10**12, "decoding.max_tokens: 1000000000000 must be an integer in 1..1,000,000"),
    ("model.backend", "vllm", "model.backend: 'vllm' is not one of 'openai', 'sim'"),
    ("endpoints.deepseek.profile", "anthropic", "endpoints.deepseek.profile: 'anthropic' is not one of"),
    ("pool.keep_raw", "no", "pool.keep_raw: expected true or false, got 'no'"),
    ("pool.concurrency", 0, "pool.concurrency: 0 must be an integer in 1..256"),
    ("eval.k", [1, 2, 2], "eval.k: [1, 2, 2] must be without repeats"),
    ("eval.k", [0, 1], "eval.k: [0, 1] must be a list of integers >= 1"),
    ("eval.ci_level", 1.0, "eval.ci_level: 1.0 must be in [0.5, 1)"),
    ("online.percentiles", {"low": 120}, "online.percentiles.low: 120 must be a percentile in [0, 100]"),
    ("online.consensus", 0.5, "online.consensus: 0.5 must be in (0.5, 1]"),
    ("debate.agents", 12, "debate.agents: 12 must be an integer in 3..9"),
    ("debate.datasets", [], "debate.datasets: [] must be a non-empty list"),
    ("datasets.aime_2025.kind", "proofs", "datasets.aime_2025.kind: 'proofs' is not one of 'problems', 'steps'"),
    ("endpoints.deepseek.pricing.output", -1, "endpoints.deepseek.pricing.output: -1.0 must be >= 0"),
]


@pytest.mark.parametrize(("key", "value", "says"), WRONG)
def test_wrong_values_are_flagged_by_the_schema_and_by_check_params(
        validator: jsonschema.Draft202012Validator, tmp_path: Path, key: str, value: Any, says: str) -> None:
    path = params_with(tmp_path, key, value)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {says}")):
        load_params(path)
    assert list(validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8")))) != []


@pytest.mark.parametrize("section", ["datasets", "endpoints"])
def test_a_key_with_a_dot_is_flagged_by_the_schema(validator: jsonschema.Draft202012Validator, section: str) -> None:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    first = next(iter(params[section]))
    params[section]["gpt-4.1"] = params[section].pop(first)
    assert any("gpt-4.1" in error.message for error in validator.iter_errors(params))


def reference_keys(section: object, path: str = "", named: bool = False) -> list[str]:
    """The reference's spelling of every key in a params file: entries of named maps as <name>."""
    if not isinstance(section, dict) or path.endswith(("extra_body", "percentiles")):
        return [path] if path else []
    keys = [path] if named else []
    for key, value in section.items():
        child = f"{path}.{ENTRY}" if named else (f"{path}.{key}" if path else str(key))
        keys += reference_keys(value, child, named=child in NAMED)
    return keys


NAMED = {"datasets", "endpoints", "grading.runs"}


@pytest.fixture
def committed_params(tmp_path: Path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(committed_params_text(), encoding="utf-8")
    return path


def test_every_key_of_params_yaml_is_in_the_reference(committed_params: Path) -> None:
    page = reference_markdown(committed_params)
    keys = set(reference_keys(yaml.safe_load(committed_params.read_text(encoding="utf-8"))))
    assert "pool.n_pool" in keys and f"datasets.{ENTRY}.source.hf_dataset" in keys
    missing = sorted(key for key in keys if f"| `{key}` |" not in page)
    assert missing == []


def test_the_reference_shows_the_committed_values_and_bounds(committed_params: Path) -> None:
    page = reference_markdown(committed_params)
    assert "| `pool.n_pool` | integer | `512` | an integer in 1..1,000,000 | traces per problem" in page
    assert "| `model.backend` | choice | `\"openai\"` | `openai`, `sim` |" in page


def all_sections(cls: type = Params, *, entry: bool = False) -> list[tuple[type, bool]]:
    import dataclasses
    import typing

    found = [(cls, entry)]
    for field in config_fields(cls, entry=entry):
        for hint in (field.hint, *typing.get_args(field.hint)):
            if dataclasses.is_dataclass(hint):
                found += all_sections(hint, entry=typing.get_origin(field.hint) is dict)
    return found


def test_every_field_of_the_config_classes_has_an_explanation() -> None:
    sections = all_sections()
    assert len({cls for cls, _ in sections}) >= 20  # every section, entries and nested ones included
    for cls, entry in sections:
        for field in config_fields(cls, entry=entry):  # raises for a field declared without param(...)
            assert field.spec.doc.strip(), f"{cls.__name__}.{field.name} has an empty explanation"


def test_the_schema_refuses_unknown_keys_in_every_section() -> None:
    def objects(node: Any) -> list[dict]:
        if isinstance(node, dict):
            own = [node] if node.get("type") == "object" and "properties" in node else []
            return own + [found for value in node.values() for found in objects(value)]
        return [found for value in node for found in objects(value)] if isinstance(node, list) else []

    sections = objects(params_schema())
    assert len(sections) >= 20
    assert all(section["additionalProperties"] is False for section in sections)

"""`make try METHOD=...` (`demo --method`): each method run alone in its own scratch project, demo/methods/<method>/,
so a run of another method, or `make demo`, leaves its last results where they were."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_demo_user_params import user_repo
from tests.dvcproject import dvc
from tracevote.cli import demo


def test_each_method_run_alone_has_its_own_folder(tmp_path: Path) -> None:
    assert demo.scratch_for(tmp_path, None) == tmp_path / "demo"
    assert {demo.scratch_for(tmp_path, method) for method in demo.METHOD_TARGETS} == {
        tmp_path / "demo" / "methods" / method for method in demo.METHOD_TARGETS}


def test_a_run_of_another_method_or_of_all_keeps_the_last_results_of_each(tmp_path: Path) -> None:
    repo = user_repo(tmp_path / "repo", pages=False)
    results = {}
    for method in ("debate", "critique"):
        scratch = demo.scratch_for(repo, method)
        demo.prepare(repo, scratch, demo.BUILTIN_PROBLEMS)
        results[method] = scratch / "metrics" / f"{method}.md"
        results[method].parent.mkdir(parents=True)
        results[method].write_text(f"{method}'s results", encoding="utf-8")  # as its dvc repro leaves them
    everything = demo.scratch_for(repo, None)
    demo.prepare(repo, everything, demo.BUILTIN_PROBLEMS)  # make demo: a fresh scratch project around them
    demo.prepare(repo, demo.scratch_for(repo, "grading"), demo.BUILTIN_PROBLEMS)
    assert {method: path.read_text(encoding="utf-8") for method, path in results.items()} == {
        "debate": "debate's results", "critique": "critique's results"}
    assert (everything / "dvc.yaml").is_file() and (everything / "params.yaml").is_file()


def test_the_whole_demo_sees_none_of_the_one_method_projects_inside_it(tmp_path: Path) -> None:
    """DVC ignores a project inside another: `dvc repro` in demo/ runs demo/'s stages only, never a method's."""
    repo = user_repo(tmp_path / "repo", pages=False)
    one = demo.scratch_for(repo, "debate")
    demo.prepare(repo, one, demo.BUILTIN_PROBLEMS)
    dvc(one, "init", "--no-scm", "-q")
    everything = demo.scratch_for(repo, None)
    demo.prepare(repo, everything, demo.BUILTIN_PROBLEMS)
    dvc(everything, "init", "--no-scm", "-q")
    listed = dvc(everything, "stage", "list", "--all").stdout
    assert "score_debate" in listed and "methods/" not in listed, listed

"""params.yaml's `study:` section: the study report that puts every DeepConf model of a dataset in one table, priced
in dollars, compared on the same problems, with the frontier of the cheapest way to each accuracy (stage study)."""

from __future__ import annotations

from dataclasses import dataclass

from tracevote.core.typedconfig import param, require

# What study@<dataset> depends on in dvc.yaml for the debate (`deps: - ${study.debate_watch}`): the debate's results
# when it joins, else this stand-in, as fetch's source.watch (DVC has no optional dependency).
DEBATE_RESULTS = "metrics/debate_results.json"
NO_DEBATE_WATCH = "stages/study.py"


@dataclass(frozen=True)
class StudyConfig:
    datasets: tuple[str, ...] = param("the datasets the study report covers, each of deepconf.datasets: each gets "
                                      "its own stage study@<dataset>; []: no study", (), unique=True)
    k: tuple[int, ...] = param("the K the study's table and plot show, each of eval.k; []: every eval.k", (),
                               ge=1, unique=True)
    reference: str | None = param("the model the others are compared with on the same problems: deepconf.endpoint "
                                  "or one of deepconf.endpoints; null: deepconf.endpoint", None)
    debate: bool = param("true: the debate's results join the table on the datasets it ran on (debate.datasets; "
                         "score_debate runs first); false: no debate row", False)
    debate_watch: str = param(f"what study depends on for the debate in dvc.yaml: {DEBATE_RESULTS} with debate: "
                              f"true, else the stand-in {NO_DEBATE_WATCH}", NO_DEBATE_WATCH)

    def validate(self, where: str) -> None:
        expected = DEBATE_RESULTS if self.debate else NO_DEBATE_WATCH
        require(self.debate_watch == expected, where, "debate_watch", self.debate_watch,
                f"{expected!r} (debate: {str(self.debate).lower()}); set debate_watch: {expected}")


NO_STUDY = StudyConfig()

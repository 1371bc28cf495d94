"""Stage check_params: read and validate every key of params.yaml, including keys no other stage declares.

Its only dependency is the whole params.yaml, so any edit re-runs it (in well under a second) and a
typo such as `pool.concurency` fails `dvc repro` with the list of known keys. It reports every problem of
the file in one run, one line each (every paid stage refuses the same; the offline stages fail only on the keys
they declare). It writes nothing, so no other stage depends on it and it never makes one re-run.
"""

import argparse
from pathlib import Path

from tracevote.core.config import check_params
from tracevote.core.entry import stage_main
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.pool_steps import generator_problems
from tracevote.datasets.problems import normalize_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = check_params(args.params)  # a source a stage would write over first, then every other problem
    for name, dataset in params.datasets.items():  # a pool read from a local file: are its rows the generator's?
        pool = params.datasets[dataset.source.pool] if dataset.source.pool else None
        if pool is not None and pool.source.path:
            rows = read_local_rows(Path(pool.source.path))
            generator_problems(rows, normalize_rows(rows, pool, pool.source.path), pool.source.path,
                               f"datasets.{name}.source.pool ({pool.name})")
    print(f"check_params: {args.params} is valid ({len(params.datasets)} datasets; DeepConf on "
          f"{', '.join(params.deepconf.datasets)}; backend {params.model.backend})")
    for method, model in (("DeepConf pool", params.deepconf_model), ("debate agents", params.debate_model),
                          ("debate judge", params.judge_model), ("critique", params.critique_model),
                          ("grading critic", params.critic_model)):
        print(f"  {method}: {model.describe()}")
    for key in params.deepconf.endpoints:  # the study's other models (stages build_pool_model@<dataset>-<key>)
        print(f"  DeepConf pool, other model: {params.study_model(key).describe()}")


if __name__ == "__main__":
    stage_main(main)

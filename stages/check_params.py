"""Stage check_params: read and validate every key of params.yaml, including keys no other stage declares.

Its only dependency is the whole params.yaml, so any edit re-runs it (in well under a second) and a
typo such as `pool.concurency` fails `dvc repro` with the list of known keys. It writes nothing, so
no other stage depends on it and it never makes one re-run.
"""

import argparse

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    print(f"check_params: {args.params} is valid ({len(params.datasets)} datasets; DeepConf on "
          f"{', '.join(params.deepconf.datasets)}; model {params.model.name}, backend {params.model.backend})")


if __name__ == "__main__":
    stage_main(main)

"""`python -m tracevote …`: the one command-line entry point besides the DVC stage scripts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tracevote import __version__
from tracevote.cli import commands, ledger_commands, pool_commands, report_command, sim_command
from tracevote.cli.params_commands import add_params_commands
from tracevote.cli.plots import add_plots_command
from tracevote.cli.preset import add_preset_command
from tracevote.cli.view_command import add_view_command
from tracevote.core.entry import stage_main
from tracevote.core.profiles import PROFILES

Handler = Callable[[argparse.Namespace], int]
DESCRIPTION = ("tracevote measures four test-time reasoning methods on math benchmarks: majority and DeepConf "
               "confidence voting over tracked trace pools, DyLAN-style multi-agent debate, ProcessBench-style "
               "step-level critique, and grading prediction files (Math-Verify accuracy, reasoning length, an LLM "
               "critic). `dvc repro` (or `make repro`) runs the pipeline; these commands check, price, inspect and "
               "report around it.")
PARAMS_HELP = "the params file to read (default: %(default)s)"
PROBLEMS_HELP = "normalized problems, one JSON object a line (default: data/<dataset>.jsonl)"
# the keys of cli.demo.METHOD_TARGETS, for make demo and make real (not imported: light --help)
DEMO_METHODS = ("critique", "debate", "deepconf", "grading")
REAL_METHODS = (*DEMO_METHODS, "online")  # make real also runs online DeepConf live
GRADING_FORMATS = ("gsm8k", "math500", "aime", "amc23")  # tracevote.grading.gold.GRADING_FORMATS (not imported: slow)
GRADE_DESCRIPTION = ("Grade a predictions file as the grading scorer did: Math-Verify accuracy (gold first), the "
                     "reasoning's average word count and, with --enable-critic, the LLM critic (settings from the "
                     "params file's grading.critic; replies kept on a ledger, never paid twice).")
ESTIMATE_DESCRIPTION = ("What the work still missing would cost: one row per paid stage and dataset (pools, debates, "
                        "critiques, the grading critic), each pool and ledger read so finished work costs $0, a "
                        "total, and each endpoint's prices.")
PLAN_DESCRIPTION = ("Before spending: from a pilot (a scored pool, e.g. built at a small pool.n_pool), each method's "
                    "accuracy at larger K with an interval that covers the plan's own error on held-out problems, the "
                    "problems needed to tell two methods apart, and what each option costs on each endpoint; then the "
                    "cheapest that meets both targets, or one line saying the pilot cannot support a recommendation "
                    "(docs/planning.md).")
LEDGER_DESCRIPTION = ("Check or repair the ledgers of paid calls. verify reads every frame (checksum, key, payload, "
                      "simulated or real) and each ledger's setting and items; repair keeps a damaged log's good "
                      "frames, so the next run requests only the calls it dropped.")


def package_version() -> str:
    """The installed distribution's version; the source tree's __version__ when tracevote is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tracevote")
    except PackageNotFoundError:
        return __version__


class VersionAction(argparse.Action):
    """`--version`: prints "tracevote <version>" and exits, the version looked up only then (importlib.metadata
    scans every installed distribution, ~0.05 CPU s that every command would otherwise pay to build its parser)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, default: str = argparse.SUPPRESS,
                 help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"tracevote {package_version()}")
        parser.exit()


def int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    """An argparse `type=`: int_at_least(1, "a pool size")("0") raises "0 is not a pool size (an integer >= 1)"."""
    return int_between(minimum, None, what)


def int_between(minimum: int, maximum: int | None, what: str) -> Callable[[str], int]:
    bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (an integer {bounds})") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{value} is not {what} (an integer {bounds})")
        return value

    return parse


def add_pool_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pool = subparsers.add_parser("pool", help="inspect, export and import trace pools",
                                description="Inspect, export and import trace pools.")
    actions = pool.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    for name, handler, text in (
        ("status", pool_commands.cmd_pool_status, "list this dataset's pools (* = the setting params.yaml selects)"),
        ("export", pool_commands.cmd_pool_export, "write the pool as JSON lines to stdout"),
        ("import", pool_commands.cmd_pool_import, "add samples from a JSON-lines file to the pool, all or nothing"),
    ):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        action.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
        action.add_argument("--dataset", help="dataset name (default: the first of deepconf.datasets)")
        if name != "status":
            action.add_argument("--pool-dir", help="a pool folder, instead of the setting the params file describes"
                                + ("; a new or empty folder becomes a new pool with that setting"
                                   if name == "import" else ""))
        if name == "export":
            action.add_argument("--fields", metavar="A,B,...",
                                help="export only these fields, in this order (e.g. problem_id,sample_id,answer; "
                                     "default: all of them; an unknown name is an error listing the fields)")
            action.add_argument("--scores", type=Path, metavar="FILE",
                                help="add field score: each sample's confidence measures {avg, bottom10, lowest, "
                                     "tail} from the score stage's table, FILE (data/scores/<dataset>.parquet, at "
                                     "the confidence setting it was scored with); null for a sample it does not "
                                     "score")
            action.add_argument("--quiet", action="store_true",
                                help="no progress bar and no closing line on stderr (the bar shows only when "
                                     "stderr is a terminal)")
        if name == "import":
            action.add_argument("samples", help="the JSON-lines file (format: docs/pool-store.md#interchange-format), "
                                "or with --format deepconf-pickle the folder of the official offline runs' .pkl files")
            action.add_argument("--format", choices=("jsonl", "deepconf-pickle"), default="jsonl",
                                help="jsonl (default), or deepconf-pickle: facebookresearch/deepconf's "
                                     "deepconf_simple_qid<q>_rid<r>_<timestamp>.pkl, read with a restricted "
                                     "unpickler into confidence-only samples")
            action.add_argument("--problems", help=PROBLEMS_HELP)
            action.add_argument("--allow-any-sample-id", action="store_true",
                                help="admit sample ids outside 0..pool.n_pool-1 (refused by default)")
        action.set_defaults(handler=handler)


def add_run_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    probe = subparsers.add_parser("probe", help="check that the endpoint's logprobs carry a confidence signal")
    probe.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    probe.set_defaults(handler=commands.cmd_probe)

    estimate = subparsers.add_parser("estimate", help="what the work still missing would cost, before spending",
                                     description=ESTIMATE_DESCRIPTION)
    estimate.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    estimate.add_argument("--n-pool", type=int_at_least(1, "a pool size"), metavar="N",
                          help="price the DeepConf pools at N samples per problem (default: pool.n_pool); what "
                               "raising it would cost")
    estimate.set_defaults(handler=commands.cmd_estimate)

    add_plan_command(subparsers)

    report = subparsers.add_parser("report", help="print the last report, or its results table as CSV or Markdown")
    report.add_argument("--format", choices=sorted(report_command.REPORT_FILES), default="text",
                        help="text: the printed report; csv or md: the per-method results table "
                             "(default: %(default)s)")
    report.add_argument("--metrics", metavar="DIR",
                        help="the folder a report stage wrote (default: metrics/deepconf/<dataset>)")
    report.add_argument("--dataset", help="whose report (default: the first of deepconf.datasets)")
    report.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    report.set_defaults(handler=report_command.cmd_report)


def points_between(low: float, high: float, what: str) -> Callable[[str], float]:
    """An argparse `type=`: a number of accuracy points in (low, high], as a share: "10" -> 0.10."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a number of points above {low:g}, at most "
                                             f"{high:g})") from None
        if not low < value <= high:
            raise argparse.ArgumentTypeError(f"{value:g} is not {what} (a number of points above {low:g}, at most "
                                             f"{high:g})")
        return value / 100

    return parse


def add_plan_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = subparsers.add_parser("plan", help="from a pilot pool: the traces and problems a question needs, and "
                                              "their cost, before spending", description=PLAN_DESCRIPTION)
    plan.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    plan.add_argument("--dataset", action="append", metavar="NAME",
                      help="plan this dataset's pilot (repeatable; default: every one of deepconf.datasets)")
    plan.add_argument("--scores", type=Path, metavar="FILE",
                      help="the pilot's score table (default: data/scores/<dataset>.parquet; needs one --dataset)")
    plan.add_argument("--manifest", type=Path, metavar="FILE",
                      help="its pool's manifest (default: pools/<dataset>.json; needs one --dataset)")
    plan.add_argument("--pilot-traces", type=int_at_least(2, "a number of pilot traces"), metavar="N",
                      help="use each problem's first N traces as the pilot; a table with more is then the measured "
                           "run each prediction is checked against (default: every trace)")
    plan.add_argument("--target-width", type=points_between(0, 100, "an interval width"), default=0.10,
                      metavar="POINTS", help="the widest interval wanted, in accuracy points (default: 10)")
    plan.add_argument("--difference", type=points_between(0, 100, "a difference"), default=0.05, metavar="POINTS",
                      help="the difference between the two methods to find, in points (default: 5)")
    plan.add_argument("--power", type=float_between(0.5, 1, "a power"), default=0.8,
                      help="the chance of finding that difference when it is there (default: 0.8)")
    plan.add_argument("--methods", metavar="A,B",
                      help="the two methods compared (default: cons and the DeepConf method the pilot puts highest)")
    plan.add_argument("--max-k", type=int_at_least(1, "a number of traces"), default=512, metavar="K",
                      help="the largest pool a problem considered (default: 512); K runs from the pilot's size "
                           "through each power of two")
    plan.add_argument("--draws", type=int_between(2, 10_000, "a number of draws"), default=100, metavar="N",
                      help="pools resampled a problem at each K (default: 100)")
    plan.add_argument("--endpoint", action="append", default=[], metavar="KEY",
                      help="also price on this key of endpoints: (repeatable; deepconf.endpoint always)")
    plan.set_defaults(handler=commands.cmd_plan)


def float_between(low: float, high: float, what: str) -> Callable[[str], float]:
    """An argparse `type=`: a number in [low, high)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low <= value < high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a number from {low:g} to below {high:g})")
        return value

    return parse


def add_other_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    real = subparsers.add_parser("real", help="every method on the shipped model (models/tinymath.gguf) served by "
                                              "llama.cpp's server on loopback, in ./real")
    real.add_argument("--problems", type=int, default=100, help="held-out problems in the pool (default: 100)")
    real.add_argument("--traces", type=int, default=64, help="traces per problem (default: 64)")
    real.add_argument("--debates", type=int, default=10, help="problems debated (default: 10)")
    real.add_argument("--method", choices=REAL_METHODS, help="run only this method (and what it needs)")
    real.set_defaults(handler=commands.cmd_real)
    demo = subparsers.add_parser("demo", help="the whole pipeline on the simulated model, in ./demo")
    source = demo.add_mutually_exclusive_group()
    source.add_argument("--dataset", help="a file of problems: .jsonl, .json (a list), .parquet or .csv (default: "
                                          "the built-in demo set)")
    source.add_argument("--data", metavar="DIR",
                        help="a folder of dataset files: every dataset of params.yaml with a file <name>.jsonl "
                             "(.json, .parquet, .csv; or <name>_test.*) there is read from it (make try DATA=DIR)")
    demo.add_argument("--method", choices=DEMO_METHODS,
                      help="run one method and what it needs (default: all four)")
    demo.set_defaults(handler=commands.cmd_demo)

    datasets = subparsers.add_parser("datasets", help="point params.yaml's datasets at local files",
                                     description="Dataset tools for params.yaml.")
    actions = datasets.add_subparsers(dest="datasets_command", required=True, metavar="ACTION")
    local = actions.add_parser(
        "local", help="the real project offline: every dataset with a file in DIR read from it, the rest removed",
        description="Point every dataset of the params file with a file in DIR at it (<name>.jsonl, .json, "
                    ".parquet or .csv, else <name>_test.*, as `make try DATA=DIR` finds them; problem_key as the "
                    "file says it) and remove the others from datasets: and from every method that names them. "
                    "The file is rewritten as `dvc exp run -S` writes it: its comments stay.")
    local.add_argument("data", type=Path, metavar="DIR", help="a folder of dataset files, e.g. ../shared/data")
    local.add_argument("--params", type=Path, default=Path("params.yaml"), help=PARAMS_HELP)
    local.set_defaults(handler=commands.cmd_datasets_local)

    inputs = subparsers.add_parser("inputs", help="what a stage's inputs lack and how to get them: `dvc pull` "
                                   "(with a DVC remote) or the stage that makes them",
                                   description="For each stage, its inputs that are missing here and how to get "
                                               "them: `dvc pull <the stage that makes it>` when the project has a "
                                               "DVC remote, else that stage. Exit 1 when any is missing.")
    inputs.add_argument("targets", nargs="+", metavar="STAGE", help="a stage (score@aime_2025) or a foreach group")
    inputs.add_argument("--pulled", action="store_true", help="a pull was tried already (`dvc repro --pull`): say "
                        "only which stage makes what is missing")
    inputs.set_defaults(handler=commands.cmd_inputs)

    unlock = subparsers.add_parser("unlock", help="clear DVC stage locks left by killed `dvc repro` runs")
    unlock.add_argument("--rwlock", default=".dvc/tmp/rwlock", help="DVC's lock table (default: %(default)s)")
    unlock.set_defaults(handler=commands.cmd_unlock)

    critique = subparsers.add_parser("critique", help="step-level critique tools (ProcessBench, DeltaBench)")
    actions = critique.add_subparsers(dest="action", required=True, metavar="ACTION")
    convert = actions.add_parser("convert", help="print a dataset's records as critique items (JSON lines)")
    convert.add_argument("--from", dest="source_format", choices=["deltabench"], required=True,
                         help="the file's format")
    convert.add_argument("file", help="a .jsonl, .json or .csv file")
    convert.set_defaults(handler=commands.cmd_critique_convert)


def add_ledger_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = subparsers.add_parser("ledger", help="check every stored paid call; repair a damaged log",
                                   description=LEDGER_DESCRIPTION)
    actions = ledger.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    for name, handler, text in (
        ("verify", ledger_commands.cmd_ledger_verify,
         "check every frame of every ledger under PATH; exit 1 if any is bad"),
        ("repair", ledger_commands.cmd_ledger_repair, "rewrite each damaged log with only its good frames"),
    ):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        action.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                            help="a ledger folder, one of its .tvf logs, or a folder holding ledgers (default: "
                                 "whichever of pools/, study/, online/, debates/, critiques/ and grading/critic/ "
                                 "exist)")
        action.set_defaults(handler=handler)


def add_grade_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    grade = subparsers.add_parser("grade", help="grade a predictions file: Math-Verify accuracy, word count, critic",
                                  description=GRADE_DESCRIPTION)
    grade.add_argument("--dataset", required=True, choices=GRADING_FORMATS, help="the gold's format")
    grade.add_argument("--pred-path", required=True, type=Path, help='JSON lines {"id", "thinking", "content"}')
    gold = grade.add_mutually_exclusive_group()
    gold.add_argument("--gold", type=Path, help="a gold file in the dataset's format (default: the project's "
                                                "data/<dataset>.jsonl, aime: data/aime_2024.jsonl)")
    gold.add_argument("--data-root", type=Path, metavar="DIR",
                      help="the scorer's data folder: the gold is DIR/test/<dataset>_test.jsonl (gsm8k_test, "
                           "math500_test, aime_test, amc23_test)")
    grade.add_argument("--id-key", help="the gold field the predictions' ids match (default: id, else unique_id, "
                                        "else <dataset>_test_<row index from 0>)")
    grade.add_argument("--problem-key", help="the gold's problem field (default: the format's)")
    grade.add_argument("--answer-key", help="the gold's answer field (default: answer)")
    grade.add_argument("--solution-key", help="the gold's reference solution field (default: the format's)")
    grade.add_argument("--enable-critic", action="store_true", help="score the reasoning with the LLM critic")
    grade.add_argument("--critic-max-samples", type=int, metavar="N",
                       help="items the critic scores (default: grading.critic.max_samples)")
    grade.add_argument("--critic-structured", action="store_true",
                       help='ask the critic for a structured {"score": x} reply (a json_schema response format), '
                            "read as free text when it is not; on by default where the critic endpoint's profile "
                            "has json_schema replies (openai-chat, openai-reasoning, local)")
    grade.add_argument("--critic-dir", type=Path,
                       help="where the critic's replies are kept (default: the pipeline's grading/critic/<run> of "
                            "the grading run whose predictions the file is, sharing its ledger; else "
                            "grading/critic/cli)")
    grade.add_argument("--params", default="params.yaml", help="grading.* and the critic's model (default: "
                                                               "%(default)s)")
    grade.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    grade.add_argument("--limit", type=int_at_least(1, "a number of predictions"), metavar="N",
                       help="grade only the file's first N predictions (in file order) and their gold items; the "
                            "summary says so")
    grade.add_argument("--per-item", type=Path, metavar="FILE",
                       help="also write one row per gold item (id, line, gold, answer, correct, method, reasoning "
                            "words and characters, critic score, critic state, simulated critic): JSON lines "
                            "for FILE.jsonl, CSV for FILE.csv")
    grade.set_defaults(handler=commands.cmd_grade)


def add_sim_server(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = subparsers.add_parser("sim-server", help="serve the simulated model with DeepSeek's wire format")
    sim.add_argument("--params", default="params.yaml", help="model.sim is read from here (default: %(default)s)")
    sim.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    sim.add_argument("--port", type=int_between(1, 65535, "a TCP port"), default=8765,
                     help="port to listen on (default: %(default)s)")
    sim.add_argument("--faults", help="e.g. all=0.2 or 429=0.05,drop=0.05,slow_s=0.2 (docs/simulator.md)")
    sim.add_argument("--problems", help="normalized problems whose gold answers the sim should know")
    sim.add_argument("--api-key", help="require this bearer key (401 otherwise)")
    sim.add_argument("--models", help="comma-separated model names to accept (400 Model Not Exist otherwise)")
    sim.add_argument("--no-balance", action="store_true", help="answer every request with 402")
    sim.add_argument("--profile", choices=sorted(PROFILES), default="deepseek",
                     help="whose rules to enforce: the fields, token limit, sampling parameters and logprobs that "
                          "provider accepts (default: %(default)s)")
    sim.add_argument("--tokens-per-second", type=int_at_least(1, "a generation pace"), metavar="N",
                     help="make each stream's tokens at most N a second, as a real server generates them (default: "
                          "as fast as the socket takes them)")
    sim.add_argument("--send-buffer", type=int_at_least(1024, "a socket buffer size"), metavar="BYTES",
                     help="a streaming connection's send buffer (SO_SNDBUF; default: the kernel's): with "
                          "--tokens-per-second, a client that closes a stream finds the server a few tokens past it")
    sim.add_argument("--reasoning-parser", choices=("reasoning_content", "reasoning"), metavar="FIELD",
                     help="split each solve reply as a server with a reasoning parser does: the thinking in this "
                          "message field (reasoning_content: SGLang, DeepSeek, older vLLM; reasoning: newer vLLM), "
                          "the closing answer alone in content, logprobs for every token (default: no split)")
    sim.add_argument("--ignore-n", action="store_true",
                     help="answer one choice whatever a request's n asks, as llama-cpp-python's server does "
                          "(default: n choices where the profile's provider honours n)")
    sim.add_argument("--refuse-n", action="store_true",
                     help="answer a request for n > 1 with HTTP 500, as llama.cpp's llama-server does")
    sim.add_argument("--context-window", type=int_at_least(1, "a context window"), metavar="TOKENS",
                     help="refuse a request whose prompt + max_tokens exceeds TOKENS, in the profile's error shape "
                          "(default: the documented window of a known model name, none for others)")
    sim.set_defaults(handler=sim_command.cmd_sim_server)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracevote", description=DESCRIPTION)
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_commands(subparsers)
    add_pool_commands(subparsers)
    add_sim_server(subparsers)
    add_other_commands(subparsers)
    add_grade_command(subparsers)
    add_ledger_commands(subparsers)
    add_plots_command(subparsers)
    add_params_commands(subparsers)
    add_preset_command(subparsers)
    add_view_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    code = 0

    def run() -> None:
        nonlocal code
        code = handler(args)

    stage_main(run)
    return code


if __name__ == "__main__":
    sys.exit(main())

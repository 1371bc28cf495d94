"""No test gives a subprocess a fixed time limit: every such wait is conftest.hang_guard_s(), the one setting that
grows with the per-test limit, so load alone never kills a command the test's own limit would let finish (a fixed
600 s once killed `make demo` under load and failed a run)."""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

# The calls that wait on another process: subprocess.run/check_output/check_call/call, Popen.wait/communicate and
# the tests' own run/make/dvc helpers, which hand `timeout` on to subprocess.
WAITS = {"run", "check_output", "check_call", "call", "wait", "communicate", "make", "dvc"}
# Waits on something else, kept fixed on purpose: an HTTP request to a loopback server, a threading primitive.
NOT_A_PROCESS = {"requests", "urllib", "session", "Barrier", "Event"}


def fixed_limits(source: str) -> list[tuple[int, str]]:
    """(line, call) of every wait on a process whose `timeout` is a number written in the test.

    >>> fixed_limits("subprocess.run(['make'], timeout=600)\\nrequests.get(url, timeout=30)")
    [(1, 'subprocess.run')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name.split(".")[-1] not in WAITS or any(part in name for part in NOT_A_PROCESS):
            continue
        for keyword in node.keywords:
            if keyword.arg == "timeout" and isinstance(keyword.value, ast.Constant):
                found.append((node.lineno, name))
    return found


def test_no_test_gives_a_subprocess_a_fixed_time_limit() -> None:
    offenders = [f"{path.relative_to(REPO_ROOT)}:{line}: {call}(..., timeout=<number>)"
                 for path in sorted((REPO_ROOT / "tests").rglob("*.py"))
                 for line, call in fixed_limits(path.read_text(encoding="utf-8"))]
    assert not offenders, "use timeout=hang_guard_s() (tests/conftest.py):\n" + "\n".join(offenders)


def test_the_check_finds_a_fixed_limit_and_passes_the_shared_one() -> None:
    assert fixed_limits("proc.communicate(timeout=600)") == [(1, "proc.communicate")]
    assert fixed_limits("proc.communicate(timeout=hang_guard_s())") == []
    assert fixed_limits("threading.Barrier(3, timeout=120).wait(timeout=5)") == []

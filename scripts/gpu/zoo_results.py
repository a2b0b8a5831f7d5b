"""pytest plugin of scripts/gpu/zoo_verify.sh: appends one JSON line per test phase outcome to
$ZOO_RESULTS_JSONL as each finishes (on the xdist controller too), so a run stopped by its time
limit still leaves what it did."""
import json
import os


def _line(report):
    msg = ""
    if report.failed or report.skipped:
        lr = report.longrepr
        if isinstance(lr, tuple) and len(lr) == 3:  # skip: (file, line, reason)
            msg = str(lr[2])
        elif lr is not None:
            text = getattr(lr, "reprcrash", None)
            msg = text.message if text is not None else str(lr)
    return {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "message": msg[:2000]}


_WORKER = False


def pytest_configure(config):
    # Under pytest-xdist a report reaches this hook on the worker and again on the controller:
    # only the controller (or a run without xdist) writes.
    global _WORKER
    _WORKER = hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    path = os.environ.get("ZOO_RESULTS_JSONL")
    if not path or _WORKER:
        return
    # Record the call phase, and setup/teardown only when they did not pass (an error or a skip there).
    if report.when != "call" and report.passed:
        return
    with open(path, "a") as f:
        f.write(json.dumps(_line(report)) + "\n")


def pytest_collectreport(report):
    path = os.environ.get("ZOO_RESULTS_JSONL")
    if path and not _WORKER and (report.failed or report.skipped):
        with open(path, "a") as f:
            f.write(json.dumps(_line(report) | {"when": "collect"}) + "\n")

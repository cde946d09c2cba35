"""Reliability figures from one command: bad inputs, injected faults, lost/duplicated rows, memory.

Runs the reliability test files with pytest (in a child process, with this file as a pytest
plugin that records every test's outcome and the figures the tests record with
``record_property``), then the load test (``scripts/load_test.py``), and prints:

* bad inputs tried and handled (``tests/test_bad_inputs.py``: one test per case);
* faults injected and survived (``tests/test_faults.py``, plus ``tests/test_ray_engine.py``);
* rows lost and rows duplicated, summed over every fault test that compares its final table with
  an uninterrupted run's (must be 0), and over the bad-input run;
* security and property checks passed;
* red-team regression cases held (exact resume under any change, typed configuration, SQL and
  report escaping, credentials and redirects, linear normalization, bounded decoding, secrets in
  every encoding kept out of every artefact and log line, remote-call limits, conversation
  results never reused or crossed);
* driver peak RSS at both load sizes and the growth between them (target within 20 %);
* the regression cases of each failure class found by adversarial rounds, held / failed per
  class: every ``tests/test_reliability_*.py`` file whose docstring opens with
  ``Reliability class N: title.`` (and ``CLASS_FILES``).

    python scripts/reliability_report.py            # everything (slow tests, Ray, 5k/20k load)
    python scripts/reliability_report.py --quick    # no slow tests, load test at 1k/4k
    python scripts/reliability_report.py --classes  # only the per-class regression cases

Exit status 0 only when every figure is as required.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORD_ENV = "AUDIT_RELIABILITY_RECORD"
log = logging.getLogger("reliability")

GROUPS = {
    "bad inputs": "tests/test_bad_inputs.py",
    "faults": "tests/test_faults.py",
    "ray faults": "tests/test_ray_engine.py",
    "security": "tests/test_security.py",
    "properties": "tests/test_properties.py",
    "red team: resume": "tests/test_resume_exact.py",
    "red team: inputs": "tests/test_redteam_inputs.py",
    "red team: redirects": "tests/test_redirect_auth.py",
    "red team: normalizer": "tests/test_normalizer_linear.py",
    "red team: decoding": "tests/test_decode_bounds.py",
    "red team: errors": "tests/test_redteam_errors.py",
    "red team: conversation results": "tests/test_conversation_units.py",
    "red team: secrets": "tests/test_secrets.py",
    "red team: HTTP limits": "tests/test_http_limits.py",
}
RED_TEAM = [g for g in GROUPS if g.startswith("red team")]
CLASS_LINE = re.compile(r"^Reliability class (\d+): (.+?)\.?$")


#: regression files of a failure class that are not named test_reliability_*.py (their cases also
#: count under "red team" above)
CLASS_FILES = {
    "tests/test_secrets.py": (1, "secrets written to results"),
    "tests/test_conversation_units.py": (2, "conversation results reused or crossed"),
    "tests/test_http_limits.py": (5, "hosted client limits"),
}


def reliability_classes() -> dict[str, str]:
    """``tests/test_reliability_*.py`` (and ``CLASS_FILES``) -> its class label (``"class 4: tracks"``), in class order."""
    found: list[tuple[int, str, str]] = [
        (n, f"class {n}: {title}", rel) for rel, (n, title) in CLASS_FILES.items() if (REPO / rel).exists()
    ]
    for path in sorted((REPO / "tests").glob("test_reliability_*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        m = CLASS_LINE.match(doc.strip().splitlines()[0] if doc.strip() else "")
        rel = str(path.relative_to(REPO))
        found.append((int(m.group(1)), f"class {m.group(1)}: {m.group(2)}", rel) if m else (10**6, path.stem, rel))
    return {rel: label for _, label, rel in sorted(found)}


def class_counts(records: list[dict[str, Any]], classes: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Held (passed) and failed cases per class; a case that errors in set-up counts as failed."""
    out: dict[str, dict[str, Any]] = {}
    for rel, label in classes.items():
        rs = [r for r in records if r["nodeid"].startswith(rel + "::")]
        entry = out.setdefault(label, {"held": 0, "failed": 0, "skipped": 0, "failed_cases": []})
        if not rs:  # nothing ran (a collection error): one failure, never a silent "failed 0"
            entry["failed"] += 1
            entry["failed_cases"].append(f"{rel} (no case ran; see pytest's output)")
        entry["held"] += sum(r["outcome"] == "passed" for r in rs)
        entry["failed"] += sum(r["outcome"] == "failed" for r in rs)
        entry["skipped"] += sum(r["outcome"] == "skipped" for r in rs)
        entry["failed_cases"] += [r["nodeid"] for r in rs if r["outcome"] == "failed"]
    return out


def class_lines(counts: dict[str, dict[str, Any]]) -> list[str]:
    width = max((len(k) for k in counts), default=10)
    lines = [
        f"{label:<{width}} : held {c['held']:>3} / failed {c['failed']}" + (f" ({c['skipped']} skipped)" if c["skipped"] else "")
        for label, c in counts.items()
    ]
    held, failed = sum(c["held"] for c in counts.values()), sum(c["failed"] for c in counts.values())
    return [*lines, f"{'all classes':<{width}} : held {held:>3} / failed {failed}"]


def classes_only(out: Path, quick: bool) -> int:
    """``--classes``: run only the per-class regression files and print held / failed per class."""
    classes = reliability_classes()
    record = out / "classes.jsonl"
    record.unlink(missing_ok=True)
    rc = run_tests(list(classes), quick, record)
    records = [json.loads(ln) for ln in record.read_text().splitlines()] if record.exists() else []
    counts = class_counts(records, classes)
    for ln in ["", "Regression cases per failure class", "----------------------------------", *class_lines(counts)]:
        log.info("%s", ln)
    for c in counts.values():
        for nodeid in c["failed_cases"]:
            log.info("FAILED: %s", nodeid)
    (out / "classes.json").write_text(json.dumps({"classes": counts, "pytest_exit": rc}, indent=2))
    return 0 if rc == 0 and not any(c["failed"] for c in counts.values()) else 1


# -- pytest plugin (loaded in the child with ``-p reliability_report``) ---------------------------


def pytest_runtest_logreport(report: Any) -> None:
    """Append each test's result and recorded figures to the file named by $AUDIT_RELIABILITY_RECORD."""
    path = os.environ.get(RECORD_ENV)
    if not path or (report.when != "call" and not (report.when == "setup" and (report.failed or report.skipped))):
        return
    props: dict[str, Any] = {}
    for k, v in report.user_properties:  # a test may record several checks: counts add up, names join
        if k.startswith("rows_") or k == "run_rows_expected":
            props[k] = int(props.get(k, 0)) + int(v)
        elif k in props and isinstance(v, str):
            props[k] = f"{props[k]}; {v}"
        else:
            props[k] = v
    rec = {"nodeid": report.nodeid, "outcome": report.outcome, "when": report.when, "duration": round(report.duration, 2), "props": props}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, default=str) + "\n")


# -- the report ------------------------------------------------------------------------------------


def run_tests(files: list[str], quick: bool, record: Path) -> int:
    env = dict(os.environ, **{RECORD_ENV: str(record)})
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "scripts"), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "reliability_report",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
        *files,
    ]
    if quick:
        cmd += ["-m", "not slow"]
    log.info("running: %s", " ".join(cmd[1:]))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-15:]
    for ln in tail:
        log.info("  pytest | %s", ln)
    return proc.returncode


def group_of(nodeid: str) -> str:
    for name, path in GROUPS.items():
        if nodeid.startswith(path):
            return name
    return "other"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by[group_of(r["nodeid"])].append(r)
    lost = dup = changed = compared = 0
    for r in records:
        p = r["props"]
        lost += int(p.get("rows_lost", 0))
        dup += int(p.get("rows_duplicated", 0))
        changed += int(p.get("rows_changed", 0))
        compared += int(p.get("rows_expected", p.get("run_rows_expected", 0)))
    out: dict[str, Any] = {"rows_lost": lost, "rows_duplicated": dup, "rows_changed": changed, "rows_compared": compared}
    for name in GROUPS:
        rs = by.get(name, [])
        out[name] = {
            "tried": len(rs),
            "passed": sum(r["outcome"] == "passed" for r in rs),
            "failed": [r["nodeid"] for r in rs if r["outcome"] == "failed"],
            "skipped": [r["nodeid"] for r in rs if r["outcome"] == "skipped"],
        }
    out["faults_list"] = [r["props"].get("fault") or r["nodeid"].split("::")[-1] for r in by.get("faults", []) + by.get("ray faults", [])]
    return out


def run_load(sizes: list[int], out: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(REPO / "scripts" / "load_test.py"), "--sizes", *map(str, sizes), "--out", str(out)]
    log.info("running: %s", " ".join(cmd[1:]))
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    for ln in (proc.stdout + proc.stderr).splitlines()[-8:]:
        log.info("  load | %s", ln)
    path = out / "load_test.json"
    if not path.exists():
        raise SystemExit(f"load test failed ({proc.returncode}); see the lines above")
    return json.loads(path.read_text())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Print the reliability figures (bad inputs, faults, rows lost/duplicated, peak RSS).")
    p.add_argument("--quick", action="store_true", help="skip slow tests and the Ray suite; load test at 1,000 and 4,000 utterances")
    p.add_argument("--sizes", type=int, nargs=2, default=None, help="load test sizes (default 5000 20000; --quick 1000 4000)")
    p.add_argument("--load-json", type=Path, default=None, help="reuse a load_test.json from an earlier scripts/load_test.py run")
    p.add_argument("--no-ray", action="store_true", help="leave out tests/test_ray_engine.py")
    p.add_argument("--out", type=Path, default=None, help="folder for the records (default: a temporary one)")
    p.add_argument(
        "--classes", action="store_true", help="only the per-class regression cases (tests/test_reliability_*.py): held / failed per class"
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = args.out or Path(tempfile.mkdtemp(prefix="reliability-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.classes:
        return classes_only(out, args.quick)
    t0 = time.perf_counter()
    files = [GROUPS[g] for g in ("bad inputs", "faults", "security", "properties", *RED_TEAM)]
    files = [f for f in files if (REPO / f).exists()]
    classes = reliability_classes()
    files += [f for f in classes if f not in files]
    if not (args.quick or args.no_ray):
        files.append(GROUPS["ray faults"])
    record = out / "tests.jsonl"
    record.unlink(missing_ok=True)
    rc = run_tests(files, args.quick, record)
    records = [json.loads(ln) for ln in record.read_text().splitlines()] if record.exists() else []
    s = summarize(records)
    if args.load_json:
        load = json.loads(args.load_json.read_text())
    else:
        load = run_load(args.sizes or ([1000, 4000] if args.quick else [5000, 20000]), out / "load")
    small, large = load["results"][0], load["results"][-1]
    bad, faults, ray, sec, prop = (s[g] for g in ("bad inputs", "faults", "ray faults", "security", "properties"))
    lines = [
        "",
        "Reliability figures" + (" (quick)" if args.quick else ""),
        "-------------------",
        f"bad inputs tried / handled      : {bad['tried']} / {bad['passed']}",
        f"faults injected / survived      : {faults['tried'] + ray['tried']} / {faults['passed'] + ray['passed']}"
        + (f"  (engine+pipeline {faults['passed']}/{faults['tried']}, Ray suite {ray['passed']}/{ray['tried']})" if ray["tried"] else ""),
        f"rows compared with clean runs   : {s['rows_compared']}",
        f"rows lost                       : {s['rows_lost']}",
        f"rows duplicated                 : {s['rows_duplicated']}",
        f"rows changed                    : {s['rows_changed']}",
        f"security checks passed          : {sec['passed']} / {sec['tried']}",
        f"property tests passed           : {prop['passed']} / {prop['tried']}",
        f"red-team cases tried / held     : {sum(s[g]['tried'] for g in RED_TEAM)} / {sum(s[g]['passed'] for g in RED_TEAM)}  ("
        + ", ".join(f"{g.split(': ')[1]} {s[g]['passed']}/{s[g]['tried']}" for g in RED_TEAM)
        + ")",
        f"driver peak RSS at {small['n_utts']:>6} utts  : {small['peak_rss_mb']:.1f} MB "
        f"(engine phase {small['engine_peak_rss_mb']:.1f} MB)",
        f"driver peak RSS at {large['n_utts']:>6} utts  : {large['peak_rss_mb']:.1f} MB "
        f"(engine phase {large['engine_peak_rss_mb']:.1f} MB)",
        f"peak RSS growth                 : {100 * load['growth']:+.1f} % (target within {100 * load['tolerance']:.0f} %; "
        f"{load['bytes_per_extra_utt']:.0f} bytes per extra utterance)",
        f"engine-phase peak RSS growth    : {100 * load['engine_phase_growth']:+.1f} % (while streaming units, before scoring/report)"
        if load.get("engine_phase_growth") is not None
        else "engine-phase peak RSS growth    : n/a",
        f"load rows complete, unique      : {load['rows_complete']}",
        f"wall time                       : {time.perf_counter() - t0:.0f} s",
    ]
    counts = class_counts(records, classes)
    lines += ["", "regression cases per failure class:", *(f"  {ln}" for ln in class_lines(counts))]
    for c in counts.values():
        lines += [f"FAILED: {n}" for n in c["failed_cases"]]
    for name in GROUPS:
        for nodeid in s[name]["failed"]:
            lines.append(f"FAILED: {nodeid}")
        for nodeid in s[name]["skipped"]:
            lines.append(f"skipped: {nodeid}")
    for ln in lines:
        log.info("%s", ln)
    (out / "reliability.json").write_text(json.dumps({"tests": s, "classes": counts, "load": load, "pytest_exit": rc}, indent=2))
    log.info("records: %s", out)
    good = (
        rc == 0
        and s["rows_lost"] == s["rows_duplicated"] == s["rows_changed"] == 0
        and all(not s[g]["failed"] for g in GROUPS)
        and not any(c["failed"] for c in counts.values())
        and bool(load.get("pass"))
    )
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())

"""Budget outcomes as JUnit XML, the shape CI systems read natively (Jenkins, GitLab, GitHub test reporters):

    <testsuites><testsuite name tests failures errors skipped>
      <testcase classname="np.budgets.<experiment>.<checkpoint>" name="latency_ms <= 20 ms">
        <failure message type="NP-BDG-412">...</failure>     (a failed budget)
        <skipped message="not checked: ..."/>                 (a metric the combination cannot give)
      </testcase>
    </testsuite></testsuites>

One test case per budget and checkpoint. User text goes in as XML text and attributes (escaped by ElementTree).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from np_optimizer.report.budgets import FAIL, NOT_CHECKED, BudgetVerdict

__all__ = ["junit_xml", "write_junit"]


def _limit(outcome_minimum: bool, limit: float, unit: str) -> str:
    return f"{'>=' if outcome_minimum else '<='} {limit:g} {unit}"


def junit_xml(verdict: BudgetVerdict, experiment: str, timestamp: str | None = None) -> str:
    suites = ET.Element("testsuites", name="np budgets", tests=str(len(verdict.outcomes)),
                        failures=str(verdict.count(FAIL)), errors="0", skipped=str(verdict.count(NOT_CHECKED)))
    suite = ET.SubElement(suites, "testsuite", name=f"np budgets: {experiment}", tests=str(len(verdict.outcomes)),
                          failures=str(verdict.count(FAIL)), errors="0", skipped=str(verdict.count(NOT_CHECKED)),
                          time="0")
    if timestamp:
        suite.set("timestamp", timestamp)
    for outcome in verdict.outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"np.budgets.{experiment}.{outcome.model}",
                             name=f"{outcome.budget} {_limit(outcome.minimum, outcome.limit, outcome.unit)}", time="0")
        if outcome.status == FAIL:
            failure = ET.SubElement(case, "failure", message=outcome.message, type="NP-BDG-412")
            failure.text = f"{outcome.message}\nvalue from: {outcome.source}\nbudget from: {outcome.origin}"
        elif outcome.status == NOT_CHECKED:
            ET.SubElement(case, "skipped", message=f"not checked: {outcome.reason}")
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"{outcome.message}\nvalue from: {outcome.source}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def write_junit(path: Path, verdict: BudgetVerdict, experiment: str, timestamp: str | None = None) -> Path:
    """Write the JUnit file atomically; a folder in its place or a missing parent is a clear NP-CFG-400."""
    from np_optimizer.errors import ConfigError
    from np_optimizer.files import write_text

    if path.is_dir():
        raise ConfigError(f"--junit {path} is a folder.", hint="Give a file name, e.g. --junit budgets.xml.",
                          code="NP-CFG-400")
    if not path.parent.is_dir():
        raise ConfigError(f"--junit {path}: the folder {path.parent} does not exist.",
                          hint="Create the folder first, or give a path in an existing one.", code="NP-CFG-400")
    write_text(path, junit_xml(verdict, experiment, timestamp))
    return path

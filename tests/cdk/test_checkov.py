"""checkov over every synthesized template, run once: a failed check passes only with a justification in
stacks/components/checkov_justifications.yaml, and every justification must still match a failed check.

checkov runs from its own venv (.venv-scan, `make setup`; its pins clash with the project's). One run covers
the platform with every optional stack that changes a template (Studio, alert subscriptions), the variant
test_templates.py lints too, plus a canary template that must fail: it proves the scan reports failures.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, VARIANT_OPTIONAL

from skyrl_hyperpod.config import validate_config

pytestmark = pytest.mark.long_running

SCAN_VENV = Path(os.environ.get("SKYRL_HP_SCAN_VENV", REPO_ROOT / ".venv-scan"))
JUSTIFICATIONS_FILE = REPO_ROOT / "stacks" / "components" / "checkov_justifications.yaml"
# The largest configuration: Studio and the alert subscriptions add resources the default does not have.
SCANNED_VARIANT = VARIANT_OPTIONAL
CANARY_STACK = "canary"
# A log group without a customer-managed key: CKV_AWS_158 fails on it.
CANARY_TEMPLATE = {
    "Resources": {"UnencryptedLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}}}
}
CHECK_ID = re.compile(r"^CKV2?_AWS_\d+$")


@dataclass(frozen=True)
class Finding:
    check: str
    name: str
    stack: str  # the stack's name after `<name_prefix>-`
    path: str  # construct path inside the stack

    def __str__(self) -> str:
        return f"{self.check} ({self.name}) on {self.stack}/{self.path}"


@dataclass(frozen=True)
class Justification:
    check: str
    stack: str
    resources: tuple[str, ...]
    reason: str

    def covers(self, finding: Finding) -> bool:
        return (
            finding.check == self.check
            and finding.stack == self.stack
            and any(fnmatch.fnmatchcase(finding.path, pattern) for pattern in self.resources)
        )


def load_justifications(path: Path = JUSTIFICATIONS_FILE) -> list[Justification]:
    entries = yaml.safe_load(path.read_text())
    justifications = []
    for index, entry in enumerate(entries):
        where = f"{path.name} entry {index + 1}"
        assert set(entry) == {"check", "stack", "resources", "reason"}, f"{where}: keys {sorted(entry)}"
        assert CHECK_ID.match(entry["check"]), f"{where}: {entry['check']!r} is not a checkov AWS check id"
        assert entry["resources"] and all(isinstance(r, str) for r in entry["resources"]), where
        justifications.append(
            Justification(entry["check"], entry["stack"], tuple(entry["resources"]), " ".join(entry["reason"].split()))
        )
    return justifications


def unjustified(findings: list[Finding], justifications: list[Justification]) -> list[Finding]:
    return [f for f in findings if not any(j.covers(f) for j in justifications)]


def unused(findings: list[Finding], justifications: list[Justification]) -> list[Justification]:
    return [j for j in justifications if not any(j.covers(f) for f in findings)]


def run_checkov(template_files: list[Path]) -> list[dict]:
    """checkov's JSON report of `template_files`, one entry per framework (here: cloudformation)."""
    checkov = SCAN_VENV / "bin" / "checkov"
    assert checkov.exists(), f"{checkov} is missing: run `make setup` (it installs requirements-scan.txt)"
    command = [str(checkov), "--framework", "cloudformation", "--output", "json", "--compact"]
    # No policies from the Bridgecrew/Prisma platform: only the checks that ship with this pinned version.
    command += ["--skip-download", *(f"--file={file}" for file in template_files)]
    environment = {**os.environ, "BC_SKIP_MAPPING": "TRUE"}
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, timeout=900)
    # Exit code 1 means "failed checks found"; anything else is checkov itself failing.
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    return report if isinstance(report, list) else [report]


def findings_of(report: list[dict], paths: dict[tuple[str, str], tuple[str, str]]) -> dict[str, list[Finding]]:
    """Failed checks by template file name; each resource named by (stack, construct path) when the
    assembly knows it, else by its logical id."""
    found: dict[str, list[Finding]] = {}
    for framework in report:
        for failed in framework["results"]["failed_checks"]:
            file_name = Path(failed["file_path"]).name
            template = file_name.removesuffix(".template.json")
            logical_id = failed["resource"].split(".", 1)[1]
            stack, path = paths.get((template, logical_id), (template, logical_id))
            found.setdefault(file_name, []).append(Finding(failed["check_id"], failed["check_name"], stack, path))
    return found


@pytest.fixture(scope="module")
def scan(assembly_for, tmp_path_factory):
    """One checkov run over the scanned variant's templates and the canary. Returns (report, findings of the
    platform, findings of the canary)."""
    config = validate_config(SCANNED_VARIANT)
    assembly = assembly_for(SCANNED_VARIANT)
    prefix = f"{config.name_prefix}-"
    paths: dict[tuple[str, str], tuple[str, str]] = {}
    files = []
    for stack in assembly.stacks:
        files.append(Path(stack.template_full_path))
        component = stack.stack_name.removeprefix(prefix)
        for entry in stack.find_metadata_by_type("aws:cdk:logicalId"):
            paths[(stack.stack_name, entry.data)] = (component, entry.path.removeprefix(f"/{stack.stack_name}/"))
    canary = tmp_path_factory.mktemp("checkov-canary") / f"{CANARY_STACK}.template.json"
    canary.write_text(json.dumps(CANARY_TEMPLATE))
    report = run_checkov([*files, canary])
    by_file = findings_of(report, paths)
    canary_findings = by_file.pop(canary.name, [])
    platform = [finding for findings in by_file.values() for finding in findings]
    return report, platform, canary_findings


def test_every_failed_check_is_justified(scan):
    report, platform, _ = scan
    assert [framework["check_type"] for framework in report] == ["cloudformation"]
    summary = report[0]["summary"]
    assert summary["parsing_errors"] == 0
    assert summary["passed"] > 0 and summary["resource_count"] > 100  # the whole platform was scanned
    # Nothing is skipped inside a template (checkov's Metadata suppressions): every acceptance is in the file.
    assert summary["skipped"] == 0
    problems = [str(finding) for finding in unjustified(platform, load_justifications())]
    assert problems == [], f"unjustified checkov findings; fix them or justify them in {JUSTIFICATIONS_FILE.name}"


def test_every_justification_still_matches_a_failed_check(scan):
    _, platform, _ = scan
    stale = [f"{j.check} on {j.stack}/{j.resources}" for j in unused(platform, load_justifications())]
    assert stale == [], "justifications that match no failed check any more: remove them"


def test_justifications_name_a_specific_reason():
    justifications = load_justifications()
    assert justifications
    for justification in justifications:
        assert len(justification.reason) >= 100, f"{justification.check}: give the specific reason"
        # A pattern that matches every resource of a stack would justify findings nobody looked at.
        assert all(pattern.strip("*/") for pattern in justification.resources), justification
    keys = [(j.check, j.stack, j.resources) for j in justifications]
    assert len(keys) == len(set(keys))


def test_an_unjustified_failure_fails_the_scan(scan):
    _, platform, canary = scan
    # A real checkov failure that no entry covers is reported ...
    assert [finding.check for finding in canary] == ["CKV_AWS_158"]
    assert unjustified(canary, load_justifications()) == canary
    # ... and so is every platform finding once its justification is gone.
    justifications = load_justifications()
    for index, removed in enumerate(justifications):
        remaining = justifications[:index] + justifications[index + 1 :]
        reported = unjustified(platform, remaining)
        assert reported and all(removed.covers(finding) for finding in reported), removed


def test_justification_file_errors_are_reported(tmp_path):
    broken = tmp_path / "justifications.yaml"
    broken.write_text(
        yaml.safe_dump([{"check": "CKV_AWS_999x", "stack": "storage", "resources": ["A"], "reason": "r"}])
    )
    with pytest.raises(AssertionError, match="not a checkov AWS check id"):
        load_justifications(broken)
    broken.write_text(yaml.safe_dump([{"check": "CKV_AWS_18", "stack": "storage", "resources": ["A"]}]))
    with pytest.raises(AssertionError, match="keys"):
        load_justifications(broken)

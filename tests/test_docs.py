"""The documentation stays true to the code: generated pages are current, and no page, comment
or test sends the reader to a file outside this repository."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.skipif(
    sys.version_info[:2] not in ((3, 11), (3, 12)),
    reason="the page holds argparse's wording of Python 3.11/3.12",
)
def test_the_cli_reference_page_is_generated_from_the_current_parser():
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_page_of_the_docs_is_in_the_navigation():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert pages, "docs/ holds no page"
    missing = [p for p in pages if f": {p}" not in nav]
    assert not missing, f"pages left out of mkdocs.yml's nav: {missing}"


def test_the_readme_is_a_landing_page():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    links = set(re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)))
    assert links, "the README links into docs/"
    assert all((REPO / link).exists() for link in links), links


FOREIGN = re.compile(r"DESIGN\.md|evidence-interface\.md|\.\./shared|shared/calibration")


def test_nothing_names_a_file_outside_the_repository():
    here = {"tests/test_docs.py"}
    roots = ["gputui", "tests", "bench", "scripts", "docs", "deploy"]
    files = [
        p for r in roots for p in (REPO / r).rglob("*") if p.suffix in (".py", ".md", ".sh", ".c")
    ]
    files += [REPO / n for n in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    hits = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in files
        if p.exists() and p.relative_to(REPO).as_posix() not in here
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if FOREIGN.search(line)
    ]
    assert not hits, "\n".join(hits)


def test_ci_runs_the_readmes_test_command():
    readme = (REPO / "README.md").read_text()
    (args,) = re.findall(r"\.venv/bin/python -m pytest([^`#\n]*?)\s+# run the tests", readme)
    ci = (REPO / ".ci" / "run").read_text()
    assert f"python -m pytest{args.rstrip()})" in ci, f"README: pytest{args}; .ci/run differs"
    install = (REPO / "docs" / "install.md").read_text()
    assert f".venv/bin/python -m pytest{args}" in install


OLD_DEVICE_PATH = re.compile(r"(^|[^\w./-])device/\w")


def test_the_device_checks_are_named_where_they_live():
    """The GPU checks live in scripts/device/ (run from the repository root); a path to the
    old top-level device/ would send a person, or run_all.sh, to nothing."""
    roots = ["scripts", "tests", "bench", "docs", "deploy"]
    files = [
        p for r in roots for p in (REPO / r).rglob("*") if p.suffix in (".py", ".md", ".sh", ".c")
    ]
    files += [REPO / n for n in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md")]
    hits = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in files
        if p.exists() and p.name != "test_docs.py"
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if OLD_DEVICE_PATH.search(line)
    ]
    assert not hits, "write scripts/device/ for:\n" + "\n".join(hits)

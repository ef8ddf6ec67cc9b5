"""The documentation stays true to the code: generated pages are current, and no page, comment
or test sends the reader to a file outside this repository."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

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


# ---------------------------------------------------------------- links on the built site

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """A page without its code: a link inside a code block or `code` is not a link."""
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify, on the text
    without its Markdown)."""
    import unicodedata

    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    out: set[str] = set()
    for h in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug, n = _slug(h), 1
        while slug in out:  # toc numbers repeated headings: x, x_1, x_2
            slug = f"{_slug(h)}_{n}"
            n += 1
        out.add(slug)
    return out


def broken_links(docs: Path) -> list[str]:
    """Every relative link of docs/*.md that the built site could not follow: a target outside
    docs/ (mkdocs publishes only docs/), a file that is not there, or an anchor no heading
    makes. What `mkdocs build --strict` refuses, checked without mkdocs."""
    import posixpath

    bad = []
    for page in sorted(docs.rglob("*.md")):
        rel = page.relative_to(docs).as_posix()
        for target in _LINK.findall(_prose(page.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # https:, mailto: ...
            path, _, anchor = target.partition("#")
            dest = posixpath.normpath(posixpath.join(posixpath.dirname(rel), path)) if path else rel
            if dest == ".." or dest.startswith("../"):
                bad.append(f"{rel}: {target} leaves docs/ (the site holds only docs/)")
            elif not (docs / dest).exists():
                bad.append(f"{rel}: {target}: no such file in docs/")
            elif anchor and dest.endswith(".md") and anchor not in _anchors(docs / dest):
                bad.append(f"{rel}: {target}: no heading makes #{anchor}")
    return bad


def test_every_relative_link_in_the_docs_resolves_on_the_built_site():
    bad = broken_links(REPO / "docs")
    assert not bad, "\n".join(bad)


def test_the_link_check_sees_the_links_that_broke_the_strict_build(tmp_path):
    """The three links that once broke `mkdocs build --strict` (while CI passed with -q)."""
    (tmp_path / "screenshots").mkdir()
    (tmp_path / "screenshots" / "a.svg").write_text("<svg/>")
    (tmp_path / "x.md").write_text("# X\n\n## Two words\n")
    (tmp_path / "page.md").write_text(
        "[shot](../screenshots/a.svg) [data](../gputui/data/README.md) [ok](screenshots/a.svg)\n"
        "[gone](y.md) [anchor](x.md#two-words) [no anchor](x.md#three) `[code](../z.md)`\n"
    )
    bad = broken_links(tmp_path)
    assert len(bad) == 4, bad
    assert [b.split(": ")[1].split()[0] for b in bad] == [
        "../screenshots/a.svg",
        "../gputui/data/README.md",
        "y.md",
        "x.md#three",
    ]


def test_ci_builds_the_docs_strictly_and_never_quietly():
    """`mkdocs build -q` drops the warnings that --strict counts and exits 0 over broken
    links: CI's build must be strict and unquieted, with its log kept."""
    ci = (REPO / ".ci" / "run").read_text()
    (cmd,) = re.findall(r"\.venv-docs/bin/mkdocs build[^)\n]*", ci)
    words = cmd.split()
    assert "--strict" in words and not {"-q", "--quiet"} & set(words), cmd
    assert ">.ci-docs.log" in ci and "tail -n 25 .ci-docs.log" in ci


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed")
def test_the_docs_build_with_mkdocs_strict(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr, r.stderr


def test_the_docs_site_has_every_screenshot_the_pages_show():
    """docs/screenshots is the same files as screenshots/ (a link to it, which
    scripts/screenshots.py writes), and every screenshot a page or the README shows is one
    that the script makes."""
    script = (REPO / "scripts" / "screenshots.py").read_text()
    made = set(re.findall(r'^\s+"([\w-]+)": ', script, re.M))
    shown = set()
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        shown |= set(re.findall(r"screenshots/([\w-]+)\.svg", page.read_text()))
    assert shown and shown <= made, f"not made by scripts/screenshots.py: {shown - made}"
    for name in sorted(shown):
        top, docs = (
            REPO / "screenshots" / f"{name}.svg",
            REPO / "docs" / "screenshots" / f"{name}.svg",
        )
        assert top.read_bytes() == docs.read_bytes(), f"{docs} differs from {top}"


# An install command that names the package itself (with or without extras), not a path or
# a wheel file: `pipx install gputui`, `uv tool install 'gputui[probe]'`, `pip install gputui`.
FROM_INDEX = re.compile(
    r"\b(?:pipx|uv tool|uv pip|pip3?|python3? -m pip)\s+install\s+(?:-\S+\s+)*"
    r"['\"]?gputui(?:\[[^\]]*\])?['\"]?(?![\w./-])"
)


def test_no_page_tells_a_newcomer_to_install_from_the_package_index():
    """gputui is not on the package index: a page that leads with `pipx install gputui` sends
    a newcomer to an error. A checkout (`pipx install .`, `'.[probe]'`) or a wheel is fine."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    hits = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in pages
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if FROM_INDEX.search(line)
    ]
    assert not hits, "install from a checkout or a wheel instead:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line,from_index",
    [
        ("pipx install gputui              # or: uv tool install gputui", True),
        ("pip install 'gputui[exporter]'", True),
        ("uv tool install -q gputui", True),
        ("pipx install .                   # in a checkout", False),
        ("pip install '.[probe]'", False),
        ("pipx install dist/gputui-0.3.0-py3-none-any.whl", False),
        ("pip install gputui-0.3.0-py3-none-any.whl", False),
        ("pip install py-spy", False),
    ],
)
def test_the_index_check_tells_a_package_name_from_a_path(line, from_index):
    assert bool(FROM_INDEX.search(line)) is from_index


def test_a_version_the_docs_name_ahead_of_this_one_is_said_to_be_unreleased():
    """docs/costs.md said "Since 0.3.0" while `gputui --version` said 0.2.0: a reader then
    looks for a release that is not there. A later version is named only in a paragraph
    that says it is not released yet."""
    from gputui import __version__

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    bad = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        for para in re.split(r"\n\s*\n", _FENCE.sub("", page.read_text())):
            said = re.findall(
                r"\b(?:gputui|[Ss]ince|[Ff]rom|[Ii]n|version) v?(\d+\.\d+\.\d+)(?![.\d])", para
            )
            ahead = [v for v in said if key(v) > key(__version__)]
            if ahead and not re.search(r"unreleased|not yet released", para, re.I):
                bad.append(f"{page.relative_to(REPO)}: {ahead[0]}: {' '.join(para.split())[:80]}")
    assert not bad, f"gputui is {__version__}:\n" + "\n".join(bad)


def test_the_demo_page_names_exactly_the_sub_commands_that_read_the_demo():
    """docs/demo.md said every sub-command reads the demo; `dump`, `record`, `probe`, `fleet`
    and `merge` do not. Its list is the parser's: those that take --demo."""
    from gputui.cli import build_parser
    from gputui.commands.argorder import _subparsers

    takes = {
        name
        for name, p in _subparsers(build_parser()).items()
        if "--demo" in p._option_string_actions
    }
    page = (REPO / "docs" / "demo.md").read_text()
    (sentence,) = re.findall(r"The sub-commands that read samples read the demo: ([^.]*)\.", page)
    named = set(re.findall(r"`(\w+)`", sentence))
    assert named == takes, f"demo.md names {sorted(named)}; --demo is taken by {sorted(takes)}"

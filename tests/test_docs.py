"""The project's own documents, docs/rules.md and docs/hand-record.md: their examples are
what the code computes, and the code cites them (and nothing a user's clone lacks)."""

import doctest
import importlib
import io
import json
import re
from pathlib import Path

import pytest

from service.cli import run_deal

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "docs" / "rules.md"
HAND_RECORD = ROOT / "docs" / "hand-record.md"

#: Where the project's text lives: code, tests, docs and the contract.
CITING = ["service", "workers", "tests", "docs", "README.md", "openapi.yaml"]
#: Files of the source material, outside the repository.
ABSENT = ("RULES.md", "HAND-RECORD", "../shared", "/work/shared")
#: A section citation: §4.8, §4-5, §4.2-3, §5.2–§5.7.
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)?)(?:\s?[-–]\s?§?(\d+(?:\.\d+)?))?")


def texts():
    for name in CITING:
        path = ROOT / name
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.suffix in (".py", ".md", ".yaml", ".sql") and file != Path(__file__).resolve():
                yield file, file.read_text(encoding="utf-8")


def headings() -> set[str]:
    return set(
        re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", RULES.read_text(encoding="utf-8"), re.MULTILINE)
    )


def cited_sections(text: str):
    for first, last in SECTION.findall(text):
        yield first
        if last:
            # "§4.2-3" ends at 4.3
            yield last if "." in last or "." not in first else f"{first.rsplit('.', 1)[0]}.{last}"


def doctested():
    """Every document and module that shows an interactive example (``>>>``)."""
    for file, text in texts():
        if ">>> " in text and file.suffix in (".md", ".py"):
            yield str(file.relative_to(ROOT))


@pytest.mark.parametrize("name", sorted(doctested()))
def test_the_examples_the_docs_show_are_what_the_code_computes(name):
    options = doctest.NORMALIZE_WHITESPACE
    if name.endswith(".md"):
        result = doctest.testfile(str(ROOT / name), module_relative=False, optionflags=options)
    else:
        module = importlib.import_module(name.removesuffix(".py").replace("/", "."))
        result = doctest.testmod(module, optionflags=options)
    assert result.attempted > 0 and result.failed == 0


def test_the_worked_scoring_example_is_doctested():
    assert "docs/rules.md" in set(doctested())


def test_the_deal_example_is_what_ddz_deal_prints():
    text = HAND_RECORD.read_text(encoding="utf-8")
    block = re.search(r"`ddz deal --seed (\w+)`.*?```json\n(.*?)```", text, re.DOTALL)
    printed = io.StringIO()
    assert run_deal(block.group(1), printed) == 0
    assert json.loads(block.group(2)) == json.loads(printed.getvalue())


def test_nothing_cites_a_document_a_clone_lacks():
    citations = [
        f"{file.relative_to(ROOT)}:{n}: {line.strip()}"
        for file, text in texts()
        for n, line in enumerate(text.splitlines(), 1)
        if any(absent in line for absent in ABSENT)
    ]
    assert citations == []


def test_every_cited_section_is_a_heading_of_the_rules():
    sections = headings()
    assert {"1", "2", "3", "4", "4.8", "4.10", "5", "5.8", "6"} <= sections
    missing = [
        f"{file.relative_to(ROOT)}: §{number}"
        for file, text in texts()
        for number in cited_sections(text)
        if number not in sections
    ]
    assert missing == []


def test_the_readme_names_every_setting():
    from service.config import Config

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [v for v in Config._ENV.values() if not re.search(rf"`{v}[`=]", readme)]
    assert missing == []

"""docs/conformance.md's coverage table is generated and current, and every id of
protocol.md is either checked by a conformance test or has a reason in untested.py."""
from concast.conform import coverage, specids
from concast.conform.untested import WHY


def test_every_id_is_tested_or_explained_and_nothing_else_is_listed():
    assert coverage.problems(specids.spec_ids(), coverage.tested()) == []


def test_an_id_neither_tested_nor_explained_is_reported():
    ids = {"9.9-1": "a sentence that must hold", **specids.spec_ids()}
    assert "[9.9-1] has no test and no reason in untested.py" in \
        coverage.problems(ids, coverage.tested())


def test_a_test_naming_an_unknown_id_is_reported():
    tests = {**coverage.tested(), "7-99": ["test_x"]}
    assert "tests name [7-99], which protocol.md does not have" in \
        coverage.problems(specids.spec_ids(), tests)


def test_the_table_in_docs_is_the_generated_one():
    text = coverage.DOC.read_text()
    assert coverage.render(text) == text, "run: python -m concast.conform.coverage"


def test_the_table_lists_each_untested_id_with_its_reason():
    text = coverage.DOC.read_text()
    for i, why in WHY.items():
        assert f"| {i} |" in text and why.replace("|", "\\|")[:40] in text

"""Stable ids of docs/protocol.md's normative sentences (concast.conform.specids)."""
import re

import pytest

from concast.conform import specids

DOC = """# t

## 1. Options

A parser must find the option. [1-1] The walk is a loop.

- a second option gives `dup`. [1-2]

### 1.2 Errors

| error | when |
| --- | --- |
| `truncated` | fewer than 20 bytes [1.2-1] |

```
a must inside a code block is not a sentence
```
"""


def test_the_protocol_document_has_one_well_formed_id_per_normative_sentence():
    ids = specids.spec_ids()
    assert len(ids) >= 60
    assert all(re.fullmatch(r"\d+(\.\d+)?-\d+", i) for i in ids)
    assert "1.1-4" in ids and "option_truncated" in ids["1.1-4"]


def test_ids_are_read_back_with_their_sentence_and_code_blocks_are_skipped():
    found = specids.check(DOC)
    assert [(u.id, u.text) for u in found] == [
        ("1-1", "A parser must find the option. [1-1]".replace(" [1-1]", "")),
        ("1-2", "a second option gives `dup`."),
        ("1.2-1", "`truncated` | fewer than 20 bytes"),
    ]


def test_a_duplicated_id_fails_the_check():
    with pytest.raises(specids.SpecIdError, match=r"id \[1-1\] also at line"):
        specids.check(DOC.replace("[1-2]", "[1-1]"))


def test_a_malformed_id_fails_the_check():
    with pytest.raises(specids.SpecIdError, match=r"malformed id \[1-x\]"):
        specids.check(DOC.replace("The walk is a loop.", "The walk is a loop [1-x]."))


def test_an_id_naming_another_section_fails_the_check():
    with pytest.raises(specids.SpecIdError, match=r"is in section 1.2"):
        specids.check(DOC.replace("[1.2-1]", "[1-3]"))


def test_a_normative_sentence_without_an_id_fails_the_check():
    with pytest.raises(specids.SpecIdError, match="without an id"):
        specids.check(DOC.replace(" [1-2]", ""))


def test_new_sentences_get_the_next_free_number_and_old_ids_stay():
    doc = DOC.replace("The walk is a loop.", "Routers must drop it.")
    doc = doc.replace(" [1-1]", " [1-7]")
    new = specids.add_ids(doc)
    assert "find the option. [1-7]" in new
    assert "Routers must drop it. [1-8]" in new
    assert "gives `dup`. [1-2]" in new
    assert specids.add_ids(new) == new

"""Stable ids for the normative sentences of docs/protocol.md.

An id `[2.3-4]` ends the 4th normative sentence of section 2.3. Ids are written into the
document once (`--write` numbers the sentences that have none with the next free number of
their section, so existing ids never move) and from then on are read back from the text:

    python -m concast.conform.specids            # list: id, sentence
    python -m concast.conform.specids --check    # exit 1 on a missing, duplicated or bad id
    python -m concast.conform.specids --write    # add ids to normative sentences without one

A normative unit is a prose sentence or list item with one of NORMATIVE's words, or a row of
an error table (`| error | when |` or `| code | name | ... |`). Code blocks are never looked at.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from concast import ROOT

PROTOCOL = ROOT / "docs" / "protocol.md"
NORMATIVE = re.compile(
    r"\bmust\b|\bnever\b|\bdrops?\b|\bdropped\b|\bcounts?\b|\bcounted\b|\bignored\b"
    r"|\bis not\b|\bare not\b|\belse `|\bgives `|\bis `[a-z_]+`|\bmalformed\b"
    r"|\bdiverted\b|\bdecremented\b|\bforwarded\b|\bgets ERROR\b|\btreat\b|\bcopies\b"
    r"|\bsends?\b|\bforget\b|\bcreate\b|\bis over\b|\brebuilt\b", re.I)
ID_TEXT = re.compile(r" ?\[(\d+(?:\.\d+)?)-(\d+)\]")
ANY_BRACKET_ID = re.compile(r"\[[0-9][^\]\s]*-[^\]\s]*\]")
HEADING = re.compile(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? ")
ERROR_TABLE = re.compile(r"^\|\s*(error|code)\s*\|")
# A sentence ends at ". " or at the end of its paragraph; "e.g." and "i.e." do not end one.
SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.(?=\s|$)")


class SpecIdError(ValueError):
    pass


@dataclass
class Unit:
    section: str          # "2.3"
    text: str             # the sentence, id removed, whitespace folded
    start: int            # offsets of the sentence in the document (end: after its id)
    end: int
    number: int | None    # the n of [section-n], None while it has no id
    line: int

    @property
    def id(self) -> str | None:
        return None if self.number is None else f"{self.section}-{self.number}"


def _fold(s: str) -> str:
    return " ".join(ID_TEXT.sub("", s).split())


def _sentences(block: str, base: int):
    """(start, end) of each sentence of a prose block; `end` includes a trailing id."""
    pos = 0
    bullet = re.match(r"\s*(?:[-*]|\d+\.)\s+", block)
    if bullet:
        pos = bullet.end()
    while pos < len(block):
        while pos < len(block) and block[pos].isspace():
            pos += 1
        if pos >= len(block):
            break
        m = SENTENCE_END.search(block, pos)
        end = m.end() if m else len(block.rstrip())
        if m is None:
            end = len(block.rstrip())
        idm = ID_TEXT.match(block, end)
        if idm:
            end = idm.end()
        yield base + pos, base + end
        pos = end


def units(text: str) -> list[Unit]:
    """Every normative unit of the document, in order."""
    out: list[Unit] = []
    section: str | None = None
    lines = text.splitlines(keepends=True)
    offsets, o = [], 0
    for ln in lines:
        offsets.append(o)
        o += len(ln)
    i, fence, table_kind = 0, False, False
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("```"):
            fence = not fence
            i += 1
            continue
        if fence:
            i += 1
            continue
        h = HEADING.match(ln)
        if h:
            section = h.group(2)
            i += 1
            continue
        if ln.startswith("#"):
            i += 1
            continue
        if ln.startswith("|"):
            if ERROR_TABLE.match(ln):
                table_kind = True
            elif not ln.startswith("| ---") and not ln.startswith("| :") and table_kind \
                    and section is not None and not re.match(r"^\|\s*-", ln):
                body = ln.rstrip("\n").rstrip()
                cut = body.rfind("|")
                cell_end = offsets[i] + len(body[:cut].rstrip())
                idm = re.search(r" ?\[(\d+(?:\.\d+)?)-(\d+)\]$", body[:cut].rstrip())
                out.append(_unit(section, text, offsets[i] + 1, cell_end, i + 1, idm))
            i += 1
            continue
        table_kind = False
        if not ln.strip() or section is None:
            i += 1
            continue
        # a paragraph or one list item: lines up to a blank line, a heading, a fence,
        # a table, or the next list item
        j = i + 1
        while j < len(lines) and lines[j].strip() and not lines[j].startswith(("#", "```", "|")) \
                and not re.match(r"\s*(?:[-*]|\d+\.)\s+", lines[j]):
            j += 1
        start = offsets[i]
        block = "".join(lines[i:j])
        for s, e in _sentences(block, start):
            sentence = text[s:e]
            if NORMATIVE.search(ID_TEXT.sub("", sentence)) or ID_TEXT.search(sentence):
                out.append(_unit(section, text, s, e, text.count("\n", 0, s) + 1,
                                 ID_TEXT.search(sentence)))
        i = j
    return out


def _unit(section, text, start, end, line, idm) -> Unit:
    number = None
    if idm:
        if idm.group(1) != section:
            raise SpecIdError(f"line {line}: id [{idm.group(1)}-{idm.group(2)}] "
                              f"is in section {section}")
        number = int(idm.group(2))
    return Unit(section, _fold(text[start:end].strip(" |")), start, end, number, line)


def check(text: str) -> list[Unit]:
    """The units, after checking every one has a well-formed id, unique in the document;
    raises SpecIdError naming each problem."""
    problems = []
    found = units(text)
    seen: dict[str, int] = {}
    for u in found:
        if u.id is None:
            problems.append(f"line {u.line}: normative sentence without an id: {u.text[:70]!r}")
        elif u.id in seen:
            problems.append(f"line {u.line}: id [{u.id}] also at line {seen[u.id]}")
        else:
            seen[u.id] = u.line
    good = {f"[{u.id}]" for u in found if u.id}
    for m in ANY_BRACKET_ID.finditer(text):
        if m.group(0) not in good and not re.fullmatch(r"\[\d+(\.\d+)?-\d+\]", m.group(0)):
            problems.append(f"line {text.count(chr(10), 0, m.start()) + 1}: "
                            f"malformed id {m.group(0)}")
    if problems:
        raise SpecIdError("\n".join(problems))
    return found


def add_ids(text: str) -> str:
    """`text` with an id after every normative unit that has none; existing ids stay."""
    found = units(text)
    last: dict[str, int] = {}
    for u in found:
        if u.number is not None:
            last[u.section] = max(last.get(u.section, 0), u.number)
    edits = []
    for u in found:
        if u.number is None:
            last[u.section] = last.get(u.section, 0) + 1
            edits.append((u.end, f" [{u.section}-{last[u.section]}]"))
    for pos, s in sorted(edits, reverse=True):
        text = text[:pos] + s + text[pos:]
    return text


def spec_ids(path: Path = PROTOCOL) -> dict[str, str]:
    """{id: sentence} of the checked document, in document order."""
    return {u.id: u.text for u in check(path.read_text())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="concast conform ids", description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=PROTOCOL)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true")
    g.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    text = a.file.read_text()
    if a.write:
        new = add_ids(text)
        a.file.write_text(new)
        print(f"{a.file}: {len(units(new))} ids")
        return 0
    try:
        found = check(text)
    except SpecIdError as e:
        print(f"{a.file}:\n{e}", file=sys.stderr)
        return 1
    if not a.check:
        for u in found:
            print(f"[{u.id}] {u.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

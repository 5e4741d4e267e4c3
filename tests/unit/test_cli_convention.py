"""The CLI convention of docs/cli.md, held against every verb: every argument has help text,
`--help` works at every level (the verbs that hand their arguments to another parser too:
spec, net up, every experiment), and a bad command line exits 2 with a message on stderr,
never a traceback."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from concast import cli, expcli


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("concast",)):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, path + (name,))


def test_every_argument_of_every_verb_has_help_text():
    missing = [(" ".join(path), a.option_strings or a.dest)
               for path, parser in walk(cli.build_parser()) for a in parser._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    assert missing == []


def test_the_top_level_help_says_what_concast_is_and_shows_examples():
    text = cli.build_parser().format_help()
    assert "programmable router middleware" in text
    assert len(re.findall(r"^  (sudo )?concast ", text, re.M)) >= 3   # three examples
    for path, parser in walk(cli.build_parser()):
        if len(path) == 2:
            assert path[1] in text


def concast(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concast.cli", *args], capture_output=True,
                          text=True, timeout=60)


HELPS = [("--help",), ("spec", "--help"), ("spec", "run", "--help"), ("spec", "check", "--help"),
         ("spec", "upload", "--help"), ("net", "up", "--help"), ("exp", "--help"),
         *[("exp", name, "--help") for name in sorted(expcli.EXPERIMENTS)],
         *[(path[1], "--help") for path, _ in walk(cli.build_parser()) if len(path) == 2]]


@pytest.mark.parametrize("args", sorted(set(HELPS)), ids=" ".join)
def test_help_works_at_every_level(args):
    r = concast(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage" in r.stdout.lower() and "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [("bogus",), ("exp", "nosuch"), ("decode", "zz"),
                                  ("send", "--to", "10.0.0.1"), ("spec", "run", "--nope"),
                                  ("recv", "--group", "x")], ids=" ".join)
def test_a_bad_command_line_exits_2_and_says_why(args):
    r = concast(*args)
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert r.stderr.strip() and "Traceback" not in r.stderr

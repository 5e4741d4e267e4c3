"""The CLI convention of docs/cli.md, held against every verb: every argument has help text,
`--help` works at every level (the verbs that hand their arguments to another parser too:
spec, net up, every experiment), a bad command line exits 2 with a message on stderr, never a
traceback; `--json` is a switch, results go to `--out DIR`, durations are `--duration` and
`--timeout`, `--dataplane` has one default, `--cc` is only the host transport's, the old names
are hidden aliases, and a missing prerequisite exits 3 naming it."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
from unittest import mock

import pytest

from concast import cli, expcli, prereq
from concast.argtypes import DATAPLANES, DEFAULT_DATAPLANE
from concast.topologies import leftovers, up


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("concast",)):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, path + (name,))


class _Built(Exception):
    """Carries the parser a verb's main() built, before it parses anything."""


def parser_of(main) -> argparse.ArgumentParser:
    """The argparse parser `main` builds for itself (experiments, net cleanup), caught at its
    parse_args call so nothing runs."""
    def grab(self, *args, **kw):
        raise _Built(self)
    with mock.patch.object(argparse.ArgumentParser, "parse_args", grab), \
            mock.patch.object(argparse.ArgumentParser, "parse_known_args", grab):
        try:
            main([])
        except _Built as b:
            return b.args[0]
    raise AssertionError(f"{main} parsed no arguments")


def every_parser():
    """(path, parser) for every verb: the `concast` tree, and the parsers of the verbs that
    hand their arguments on (every experiment, net up, net cleanup)."""
    yield from walk(cli.build_parser())
    for name, module in sorted(expcli.MODULES.items()):
        main = importlib.import_module(f"concast.topologies.experiments.{module}").main
        yield ("concast", "exp", name), parser_of(main)
    yield ("concast", "net", "up"), up.parser()
    yield ("concast", "net", "cleanup"), parser_of(leftovers.main)


PARSERS = list(every_parser())


def options(visible: bool | None = None):
    """(path, option string, action) for every option of every parser; visible=True: only
    those --help shows, False: only the hidden ones."""
    for path, parser in PARSERS:
        for a in parser._actions:
            hidden = a.help == argparse.SUPPRESS
            if visible is None or visible != hidden:
                for o in a.option_strings:
                    yield " ".join(path), o, a


def test_the_walk_reaches_every_verb_and_experiment():
    paths = {" ".join(p) for p, _ in PARSERS}
    assert {"concast perf", "concast conform", "concast send", "concast mplex", "concast net up",
            *(f"concast exp {n}" for n in expcli.EXPERIMENTS)} <= paths


def test_every_argument_of_every_verb_has_help_text():
    missing = [(" ".join(path), a.option_strings or a.dest)
               for path, parser in PARSERS for a in parser._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    assert missing == []


def _shown(default) -> str:
    return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in default) \
        if isinstance(default, (list, tuple)) else str(default)


def test_every_option_with_a_default_names_it_in_its_help():
    """docs/cli.md: "every option has help text with its default" -- as `default X` or, in
    net up's topology options, `(X)`. Switches, counters, appends and empty defaults have none
    to name."""
    silent = []
    for path, parser in PARSERS:
        for a in parser._actions:
            if (not a.option_strings or a.help in (None, argparse.SUPPRESS)
                    or a.default in (None, False, argparse.SUPPRESS, [], "")
                    or isinstance(a, (argparse._HelpAction, argparse._StoreTrueAction,
                                      argparse._StoreFalseAction, argparse._AppendAction,
                                      argparse._CountAction, argparse._VersionAction))):
                continue
            text = " ".join((a.help % {"default": a.default, "prog": ""}).split()
                            if "%(" in a.help else a.help.split())
            if "default" not in text and f"({_shown(a.default)})" not in text:
                silent.append((" ".join(path), a.option_strings[-1], a.default))
    assert silent == []


def test_json_is_a_switch_everywhere():
    found = [(p, a) for p, o, a in options() if o == "--json"]
    assert found, "no verb has --json"
    assert [p for p, a in found if not isinstance(a, argparse._StoreTrueAction)] == []


# The names docs/cli.md retired: result files and folders, durations, and the kernel TCP's
# --cc (now --tcp-cc); each may live on only as a hidden alias.
RETIRED = {"--save", "--output", "--pcaps", "--junit", "--secs", "--seconds", "--wait", "--limit"}


def test_no_visible_option_has_a_retired_name():
    assert [(p, o) for p, o, _ in options(visible=True) if o in RETIRED] == []


def test_every_hidden_option_is_an_old_name_kept_for_scripts():
    hidden = [(p, o) for p, o, a in options(visible=False) if o not in ("-h", "--help")]
    assert hidden and all(o in RETIRED | {"--cc"} for _, o in hidden), hidden


def test_result_folders_are_out_dir():
    outs = [(p, a) for p, o, a in options(visible=True) if o == "--out"]
    assert {"concast perf", "concast conform", "concast demo", "concast exp ack-study",
            "concast exp mplex", "concast exp transport", "concast exp mtp",
            "concast exp ctp"} <= {p for p, _ in outs}
    assert [p for p, a in outs if a.metavar != "DIR"] == []


def test_durations_are_duration_and_timeout_in_seconds():
    found = [(p, o, a) for p, o, a in options(visible=True) if o in ("--duration", "--timeout")]
    assert {(p, o) for p, o, _ in found} >= {
        ("concast perf", "--duration"), ("concast exp ctp", "--duration"),
        ("concast net up", "--duration"), ("concast exp transport", "--timeout"),
        ("concast send", "--timeout"), ("concast recv", "--timeout"),
        ("concast mplex", "--timeout")}
    for p, o, a in found:
        assert a.type is not None and a.type("1.5") == 1.5, (p, o)
        assert "seconds" in a.help, (p, o, a.help)


def test_every_dataplane_option_has_the_one_default():
    found = [(p, a) for p, o, a in options() if o == "--dataplane"]
    assert {p for p, _ in found} >= {"concast conform", "concast net up", "concast exp mplex",
                                     "concast exp ack-study"}
    for p, a in found:
        assert a.default == DEFAULT_DATAPLANE, p
        assert DEFAULT_DATAPLANE in a.choices and set(a.choices) <= set(DATAPLANES), p
        assert f"default {DEFAULT_DATAPLANE}" in a.help, p


def test_cc_is_the_host_transport_and_tcp_cc_the_kernel_tcp():
    assert [p for p, o, _ in options(visible=True) if o == "--cc"] == ["concast perf"]
    assert {p for p, o, _ in options(visible=True) if o == "--tcp-cc"} >= {
        "concast perf", "concast exp ack-study", "concast exp ctp"}


def parser_at(path: str) -> argparse.ArgumentParser:
    return next(parser for p, parser in PARSERS if " ".join(p) == path)


@pytest.mark.parametrize("path, old, new, dest, value", [
    ("concast perf", "--secs", "--duration", "duration", 2.0),
    ("concast exp ctp", "--secs", "--duration", "duration", 2.0),
    ("concast exp transport", "--limit", "--timeout", "timeout", 2.0),
    ("concast net up", "--seconds", "--duration", "duration", 2.0),
    ("concast net up", "--save", "--write-json", "write_json", "2"),
    ("concast send", "--wait", "--timeout", "timeout", 2.0),
    ("concast mplex", "--wait", "--timeout", "timeout", 2.0),
    ("concast exp ack-study", "--cc", "--tcp-cc", "tcp_cc", "cubic"),
], ids=lambda x: str(x))
def test_an_old_name_still_sets_what_the_new_one_sets(path, old, new, dest, value):
    p = parser_at(path)
    must = {"concast net up": ["tree"], "concast send": ["--to", "10.0.0.1", "--group", "5", "1"],
            "concast mplex": ["on"]}.get(path, [])
    text = "2" if dest != "tcp_cc" else "cubic"
    assert getattr(p.parse_args([*must, old, text]), dest) == value
    assert getattr(p.parse_args([*must, new, text]), dest) == value
    assert old not in p.format_help()


def test_perf_json_prints_and_out_names_the_folder():
    p = parser_at("concast perf")
    ns = p.parse_args(["--json", "--out", "x"])
    assert ns.json is True and ns.out == "x"
    assert p.parse_args([]).json is False


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


# Every verb that needs a Rust binary or spec, run where none is built: an empty checkout
# ($CONCAST_ROOT), no $CONCAST_BIN, a PATH with the system's tools only. Not root, or root
# without the binaries, the answer is the same: exit 3 naming what is missing.
NEEDS_A_BUILD = [("spec", "check", "x.wasm"), ("perf", "--mode", "bulk"),
                 ("exp", "mplex"), ("exp", "transport"), ("exp", "ctp"), ("exp", "ack-study"),
                 ("exp", "mtp", "--quick"), ("net", "up", "tree"), ("conform", "--section", "2"),
                 ("mplex", "on", "--role", "receiver")]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.mark.parametrize("args", NEEDS_A_BUILD, ids=" ".join)
def test_a_missing_prerequisite_exits_3_and_names_it(args, tmp_path):
    if any(shutil.which(b, path=SYSTEM_PATH) for b in ("concast-routerd", "concast-hostd",
                                                         "concast-spec", "concast-perf", "mtping")):
        pytest.skip("concast binaries are installed system-wide: nothing can be missing")
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONCAST_BIN", "CONCAST_SPECS", "CONCAST_ROOT")}
    env |= {"CONCAST_ROOT": str(tmp_path), "PATH": SYSTEM_PATH}
    r = subprocess.run([sys.executable, "-m", "concast.cli", *args], capture_output=True,
                       text=True, timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == prereq.EXIT, (r.returncode, r.stdout[-500:], r.stderr[-800:])
    assert "missing prerequisite" in r.stderr and "Traceback" not in r.stderr
    assert re.search(r"sudo|make (build|specs)|cargo build|setup\.sh", r.stderr), r.stderr


def test_a_closed_pipe_is_no_panic(tmp_path):
    """`concast-spec run ... | head -1`: the reader goes away after one line while the tool
    still has far more than a pipe's buffer to print (issue #27: it panicked)."""
    from concast import offline, tools
    try:
        exe, spec = tools.rust_binary("concast-spec"), tools.spec_module("sum")
    except tools.MissingTool as e:
        pytest.skip(str(e))
    stream = tmp_path / "in.jsonl"
    offline.write_sum_stream(stream, senders=8, rounds=3000)    # ~24,000 lines out
    p = subprocess.Popen([str(exe), "run", str(spec), "--input", str(stream), "--param",
                          "fanin=100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()                        # as head -1 does
    err = p.stderr.read().decode(errors="replace")
    p.wait(timeout=60)
    assert "panicked" not in err and p.returncode in (0, 1, 141, -13), (p.returncode, err)


def test_version_names_the_revision_every_binary_and_every_built_spec():
    from concast import provenance, tools
    text = cli.version()
    first, *rest = text.splitlines()
    assert first.startswith("concast ") and (tools.revision() or "") in first
    for name in provenance.BINARIES:
        line = next(x for x in rest if x.split()[0] == name)
        b = provenance.binary_record(name)
        assert ("not built" in line) if b is None else (f"sha256:{b['sha256'][:12]}" in line)
    folder = tools.spec_dir()
    for spec in sorted(folder.glob("*.wasm")) if folder else []:
        assert f"spec {spec.stem}" in text and provenance.sha256(spec)[:12] in text


def test_perf_help_lists_its_composites_algorithms_and_mtp():
    from concast.perfrun import CC_NAMES, COMPOSITES
    text = " ".join(parser_at("concast perf").format_help().split())
    assert all(c in text for c in COMPOSITES) and all(c in text for c in CC_NAMES)
    assert "mtp" in text and "MTP" in text


def test_perf_composites_are_the_transports_presets():
    rust = (tools_root() / "hosts" / "transport" / "src" / "composite.rs").read_text()
    from concast.perfrun import COMPOSITES
    names = re.findall(r'Preset::\w+ => "(\w+)"', rust)
    assert tuple(names) == COMPOSITES


def test_perf_algorithms_are_the_transports_names():
    rust = (tools_root() / "hosts" / "transport" / "src" / "cc" / "mod.rs").read_text()
    from concast.perfrun import CC_NAMES
    listed = re.search(r"pub const NAMES: \[&str; \d+\] =\s*\[([^\]]*)\]", rust)
    assert listed and re.findall(r'"(\w+)"', listed.group(1)) == CC_NAMES


def tools_root():
    from concast import tools
    if tools.CHECKOUT is None:
        pytest.skip("reads a checkout's sources")
    return tools.CHECKOUT

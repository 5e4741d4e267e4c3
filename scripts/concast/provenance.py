"""The one writer of a result's provenance (issue #27, item 2): what ran, on what, from which
revision, with which tools, when, and how busy the machine was. Every experiment and `concast
perf` call `start()` before their run, `finish()` after it, and `write()` the record beside
their results as meta.json (or embed it in their own JSON under "meta").

The record's keys (KEYS, pinned by tests/unit/test_provenance.py):
  command   the command line, as typed
  git       {"rev": full hash, "dirty": uncommitted changes to tracked files}
  versions  concast, every Rust binary's --version and SHA-256, rustc, the wasmtime crate,
            Mininet, Open vSwitch, tc, p4c (p4c-bm2-ss), BMv2 (simple_switch_grpc), Python,
            Scapy, the kernel (None where absent)
  machine   host, kernel, cpus, cpu_model, mem_total_mib, loadavg_at_start (at the end also
            loadavg_at_end), netem (the kernel has it; None when not root)
  params    the run's parameters;  seed  its random seed (or a sentence saying why none)
  started, ended (UTC, ISO 8601), secs
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from concast import tools

KEYS = ("command", "git", "versions", "machine", "params", "seed", "started", "ended", "secs")
# The binaries a concast network or measurement may run; each is recorded when it is built.
BINARIES = ("concast-routerd", "concast-hostd", "concast-spec", "concast-perf",
            "concast-linkemu", "mtping")


def _run(*argv: str, timeout: float = 5) -> str:
    """A command's first line of output, or "" when it is missing or fails."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    out = (r.stdout or r.stderr).strip()
    return out.splitlines()[0].strip() if r.returncode == 0 and out else ""


def git() -> dict:
    """{"rev", "dirty"}: the checkout's revision; "unknown" outside a checkout."""
    root = str(tools.CHECKOUT or tools.ROOT)
    rev = _run("git", "-C", root, "rev-parse", "HEAD")
    dirty = _run("git", "-C", root, "status", "--porcelain", "--untracked-files=no")
    return {"rev": rev or "unknown", "dirty": bool(dirty)}


def short_rev() -> str:
    rev = git()["rev"]
    return "norev" if rev == "unknown" else rev[:10]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_mib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return 0


def _netem() -> bool | None:
    """Whether the kernel has netem, so links could be Mininet's TCLink (`net up --links
    auto` takes it where it is); None when not root, where it cannot be tried."""
    if os.geteuid() != 0:
        return None
    from concast.netns import netem_available
    return netem_available()


def machine() -> dict:
    return {"host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(), "mem_total_mib": _mem_total_mib(),
            "loadavg_at_start": list(os.getloadavg()), "python": platform.python_version(),
            "netem": _netem()}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def binary_record(name: str) -> dict | None:
    """{path, version, sha256} of a Rust binary, or None when it is not built."""
    try:
        path = tools.rust_binary(name)
    except tools.MissingTool:
        return None
    return {"path": str(path), "version": _run(str(path), "--version"), "sha256": sha256(path)}


def _crate_version(crate: str) -> str | None:
    """The crate's version in the checkout's Cargo.lock (what the binaries were built with)."""
    lock = (tools.CHECKOUT or tools.ROOT) / "Cargo.lock"
    try:
        lines = lock.read_text().splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines[:-1]):
        if line == f'name = "{crate}"' and lines[i + 1].startswith("version = "):
            return lines[i + 1].split('"')[1]
    return None


def _python_module_version(module: str, attr: str) -> str | None:
    try:
        return str(getattr(__import__(module, fromlist=[attr]), attr))
    except Exception:       # not installed, or broken: record its absence, never fail a run
        return None


def _rustc() -> str | None:
    rustc = shutil.which("rustc") or str(Path.home() / ".cargo" / "bin" / "rustc")
    return _run(rustc, "--version") or None


def versions(binaries=BINARIES, specs=()) -> dict:
    """The tools a result depends on; None for what is not installed here."""
    from importlib import metadata
    try:
        concast = metadata.version("concast")
    except metadata.PackageNotFoundError:
        concast = None
    spec_files = {}
    for s in specs:
        try:
            p = tools.spec_module(s) if not str(s).endswith(".wasm") else Path(s)
            spec_files[Path(p).stem] = {"path": str(p), "sha256": sha256(Path(p))}
        except (tools.MissingTool, OSError):
            spec_files[str(s)] = None
    return {"concast": concast, "binaries": {b: binary_record(b) for b in binaries},
            "specs": spec_files,
            "rustc": _rustc(), "wasmtime_crate": _crate_version("wasmtime"),
            "mininet": _python_module_version("mininet.net", "VERSION"),
            "ovs": _run("ovs-vsctl", "--version") or None,
            "tc": _run("tc", "-V") or None,
            "p4c": _run("p4c-bm2-ss", "--version") or None,
            "bmv2": _run("simple_switch_grpc", "--version") or None,
            "python": platform.python_version(),
            "scapy": _python_module_version("scapy", "__version__"),
            "kernel": platform.release()}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def start(params: dict | None = None, seed=None, command: list[str] | None = None,
          binaries=BINARIES, specs=()) -> dict:
    """The record at the start of a run (ended/secs filled in by finish())."""
    return {"command": list(command) if command is not None else list(sys.argv),
            "git": git(), "versions": versions(binaries, specs), "machine": machine(),
            "params": params or {}, "seed": seed, "started": _now(), "ended": None,
            "secs": None, "_t0": time.monotonic()}


def finish(meta: dict) -> dict:
    """The end time, the run's length and the load at the end; returns the record."""
    t0 = meta.pop("_t0", None)
    meta["ended"] = _now()
    meta["secs"] = round(time.monotonic() - t0, 3) if t0 is not None else None
    meta["machine"]["loadavg_at_end"] = list(os.getloadavg())
    return meta


def public(meta: dict) -> dict:
    """The record without its private fields (what goes into a file)."""
    return {k: v for k, v in meta.items() if not k.startswith("_")}


def write(folder: Path, meta: dict, name: str = "meta.json") -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(public(meta), indent=1, default=str) + "\n")
    return path


def run_folder(base: Path, prefix: str = "") -> Path:
    """A new folder for one run's results, base/[<prefix>-]<UTC time>-<revision>; never an
    old one."""
    name = f"{prefix}-" if prefix else ""
    name += f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{short_rev()}"
    path = Path(base) / name
    n = 1
    while path.exists():            # two runs in the same second
        n += 1
        path = Path(base) / f"{name}-{n}"
    path.mkdir(parents=True)
    return path


class _Tee:
    """sys.stdout that also writes into a file (a run's printed figures are a result too)."""

    def __init__(self, stream, path: Path):
        self.stream, self.file = stream, open(path, "w")

    def write(self, text):
        self.file.write(text)
        return self.stream.write(text)

    def flush(self):
        self.file.flush()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


class Run:
    """One result folder for a script that has no folder of its own (scripts/bench_*.py):

        with provenance.Run("bench-forwarding", a.out, vars(a)) as run:
            ...                              # prints go to the terminal and run.folder/output.txt
            run.file("forwarding.json").write_text(...)

    The folder is `out` or a new results/<kind>/<UTC time>-<rev>/; meta.json is written when
    the block ends, also when it fails (its "error" says how)."""

    def __init__(self, kind: str, out=None, params: dict | None = None, seed=None,
                 binaries=BINARIES, specs=()):
        self.meta = start({k: v for k, v in (params or {}).items()}, seed, binaries=binaries,
                          specs=specs)
        self.made = not (out and Path(out).exists())     # a folder this run may take back
        self.folder = Path(out) if out else run_folder(tools.RESULTS / kind)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stdout = None

    def file(self, name: str) -> Path:
        return self.folder / name

    def __enter__(self) -> "Run":
        self._stdout = sys.stdout
        sys.stdout = _Tee(sys.stdout, self.folder / "output.txt")
        return self

    def __exit__(self, kind, err, tb):
        tee, sys.stdout = sys.stdout, self._stdout
        tee.file.close()
        if kind is SystemExit:
            self.meta["exit"] = err.code
        elif kind is not None:
            self.meta["error"] = f"{kind.__name__}: {err}"
        if self.made and self.meta.get("exit") in REFUSED:
            shutil.rmtree(self.folder, ignore_errors=True)   # nothing ran: leave no empty run behind
            return False
        write(self.folder, finish(self.meta))
        print(f"results and meta.json: {self.folder}", file=sys.stderr, flush=True)
        return False


# Exit statuses of a run refused before it started (docs/cli.md): a bad command line, a missing
# prerequisite. Such a run keeps no folder it made.
REFUSED = (2, 3)

# A bench script's options that name a file it writes; main_in_run copies each into the folder.
FILE_OPTIONS = ("--json", "--csv", "--samples-csv")


def main_in_run(kind: str, main, argv: list[str] | None = None) -> int:
    """Runs a script's main() (it parses sys.argv itself) inside a Run: `--out DIR` is taken
    off the command line first (default a new results/<kind>/<time>-<rev>/), and each file the
    script was asked to write (FILE_OPTIONS) is copied into the folder afterwards. --help
    passes through untouched, with no folder made."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(f"(every run writes meta.json, output.txt and the files below into --out DIR, "
              f"default a new folder results/{kind}/<UTC time>-<rev>/)")
        return main()
    out = None
    for i, w in enumerate(argv):
        if w == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
            del argv[i:i + 2]
            break
        if w.startswith("--out="):
            out = w.split("=", 1)[1]
            del argv[i]
            break
    files = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w in FILE_OPTIONS
             and not argv[i + 1].startswith("-")]
    sys.argv[1:] = argv
    with Run(kind, out, {"argv": argv}) as run:
        code = run.meta["exit"] = main()
        for f in files:
            if Path(f).is_file() and Path(f).resolve().parent != run.folder.resolve():
                shutil.copy(f, run.folder / Path(f).name)
    return code

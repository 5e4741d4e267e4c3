"""scripts/setup.sh's Rust step (#15 item 9), run in a subshell with a PATH and HOME that
have no cargo, in dry-run mode: nothing is downloaded or installed here."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"


def dry_run(root: Path, home: Path, path: str) -> subprocess.CompletedProcess:
    env = {"PATH": path, "HOME": str(home), "CONCAST_SETUP_DRY_RUN": "1"}
    return subprocess.run(["bash", "-c", f"source {root / 'scripts' / 'setup.sh'}; install_rust"],
                          env=env, capture_output=True, text=True, timeout=30)


def a_tree(tmp_path: Path, toolchain: str | None) -> Path:
    """A copy of setup.sh at tmp/scripts/, with a rust-toolchain.toml beside it if given."""
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, tmp_path / "scripts" / "setup.sh")
    if toolchain:
        (tmp_path / "rust-toolchain.toml").write_text(
            f'[toolchain]\nchannel = "{toolchain}"\ncomponents = ["rustfmt"]\n')
    return tmp_path


def test_without_cargo_it_installs_the_pinned_toolchain_with_rustup_init(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = dry_run(ROOT, home, "/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    want = ("https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain "
            "1.95.0 --no-modify-path")
    assert want in r.stdout, r.stdout
    assert "would run: rustup target add wasm32-unknown-unknown" in r.stdout


def test_a_rust_toolchain_toml_at_the_root_chooses_the_toolchain(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = dry_run(a_tree(tmp_path / "tree", "1.80.1"), home, "/usr/bin:/bin")
    assert "--default-toolchain 1.80.1 " in r.stdout, r.stdout


@pytest.mark.skipif(shutil.which("cargo") is None or shutil.which("rustup") is None,
                    reason="no Rust toolchain on this machine's PATH")
def test_with_cargo_on_the_path_nothing_is_installed(tmp_path):
    r = dry_run(ROOT, Path(os.environ.get("HOME", "/root")), os.environ["PATH"])
    assert r.returncode == 0, r.stderr
    assert "sh.rustup.rs" not in r.stdout and "installing Rust" not in r.stdout, r.stdout

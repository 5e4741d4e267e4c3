"""The protocol test vectors (tests/vectors/vectors.json), importable as `concast.vectors`."""
import json
from pathlib import Path

PATH = Path(__file__).with_name("vectors.json")


def load(kind: str | None = None, valid: bool | None = None) -> list[dict]:
    """All vectors, optionally only those of one kind or validity; each has `raw` bytes added."""
    out = []
    for v in json.loads(PATH.read_text())["vectors"]:
        if kind is not None and v["kind"] != kind:
            continue
        if valid is not None and v["valid"] != valid:
            continue
        out.append({**v, "raw": bytes.fromhex(v["hex"])})
    return out


def ids(vectors: list[dict]) -> list[str]:
    """Names for pytest parametrize ids."""
    return [v["name"] for v in vectors]

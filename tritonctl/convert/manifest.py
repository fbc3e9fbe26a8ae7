"""build.json: what went into a build and what came out, and the cache that reuses it.

The cache key hashes the source (its bytes, or a module's code and weights), every
option that shapes the result, and the versions of the tools that made it. A re-run
with the same key finds build.json next to an intact model file and rebuilds nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from pathlib import Path

MANIFEST_NAME = "build.json"
SCHEMA_VERSION = 1
TOOLS = ("tritonctl", "numpy", "onnx", "onnxruntime", "torch", "onnxscript", "tensorrt", "polygraphy")


def tool_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in TOOLS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def cache_key(source_digest: str, options: dict, versions: dict) -> str:
    payload = json.dumps({"source": source_digest, "options": options, "versions": versions},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def read_manifest(version_dir: Path) -> dict | None:
    try:
        data = json.loads((version_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def reusable(version_dir: Path, config_path: Path, key: str) -> dict | None:
    """The earlier manifest when its key matches and its model file and config are intact."""
    manifest = read_manifest(version_dir)
    if not manifest or manifest.get("cache_key") != key:
        return None
    model = manifest.get("model", {})
    path = version_dir / str(model.get("file", ""))
    if not model.get("file") or not path.is_file() or not config_path.is_file():
        return None
    if file_sha256(path) != model.get("sha256") or file_sha256(config_path) != manifest.get("config_sha256"):
        return None
    return manifest


def write_manifest(version_dir: Path, manifest: dict) -> Path:
    path = version_dir / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path

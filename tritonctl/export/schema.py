"""Checking a manifest against KServe's own API types: the models of the ``kserve`` package
(V1beta1InferenceService and what it holds) and, for the Kubernetes types they embed, those of
the ``kubernetes`` client that kserve depends on.

Each mapping is checked against its model's ``openapi_types`` and ``attribute_map``: an unknown
field, a value of the wrong type or a missing required field (the models' constructors refuse
those) is an error with the path to it; resource amounts must parse as Kubernetes quantities.

The check runs in a child Python (``python -m tritonctl.export.schema``, the manifests as JSON on
its standard input): importing ``kserve`` registers its own copy of the v2 protocol's protobufs
(package ``inference``), which clashes with tritonclient's in one process, and it imports
kserve's whole model server besides. That child may be another environment's Python
(``--schema-python``, or ``$TRITONCTL_KSERVE_PYTHON``): kserve caps pandas below 3, so it often
lives in a virtualenv of its own; the child needs only kserve and kubernetes besides this package's
source, which it finds through PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tritonctl.optional import MissingDependency, provider_of, require

NEEDED_BY = "tritonctl export kserve (checking manifests against KServe's schema)"
PYTHON_ENV = "TRITONCTL_KSERVE_PYTHON"  # the Python to check with, when --schema-python is not given
_NEEDED_MODULES = ("kserve", "kubernetes")
_PRIMITIVES = {"str": (str,), "bytes": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "date": (str,),
               "datetime": (str,)}


class SchemaError(ValueError):
    """A manifest KServe would not accept; the message has the path to the bad field."""


class SchemaPythonError(RuntimeError):
    """The Python named to run the check cannot run it (absent, not a Python, without kserve)."""


def schema_python(explicit: str | None = None) -> str:
    """The interpreter that runs the check: ``explicit`` (--schema-python), else $TRITONCTL_KSERVE_PYTHON,
    else this one."""
    return explicit or os.environ.get(PYTHON_ENV) or sys.executable


def schema_errors(docs: list[dict], python: str | None = None, timeout_s: float = 300) -> list[str | None]:
    """For each of ``docs``, None when KServe's models accept it as a serving.kserve.io/v1beta1
    InferenceService, else why not. The check runs in ``schema_python(python)``. MissingDependency
    when this Python lacks kserve or kubernetes; SchemaPythonError when another Python was named
    and cannot run it."""
    interpreter = schema_python(python)
    foreign = Path(interpreter).absolute() != Path(sys.executable).absolute()
    if not foreign:
        for module in _NEEDED_MODULES:
            if importlib.util.find_spec(module) is None:
                raise MissingDependency(NEEDED_BY, module, provider_of(module))
    root = str(Path(__file__).resolve().parents[2])  # this tritonctl, for the child too
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        done = subprocess.run([interpreter, "-m", "tritonctl.export.schema"], input=json.dumps(docs), env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except OSError as exc:  # absent, not executable
        raise SchemaPythonError(f"cannot run {interpreter} to check the manifests against KServe's schema: "
                                f"{exc.strerror or exc}") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise SchemaPythonError(f"the check against KServe's schema failed in {interpreter} (exit status "
                                f"{done.returncode}): {tail}") from None
    if "missing" in answer:
        raise SchemaPythonError(f"{interpreter} cannot check the manifests against KServe's schema: it has no "
                                f"{answer['missing']} module. Install both there: {interpreter} -m pip install "
                                "kserve kubernetes")
    if "failed" in answer:
        raise SchemaPythonError(f"the check against KServe's schema could not run in {interpreter}: "
                                f"{answer['failed']}")
    return answer["errors"]


def check_inference_service(doc: dict) -> None:
    """Raise SchemaError unless ``doc`` is a serving.kserve.io/v1beta1 InferenceService that
    KServe's models accept. Imports kserve into this process: for the child of schema_errors."""
    kserve = require("kserve", NEEDED_BY)
    constants = require("kserve.constants.constants", NEEDED_BY)
    api_version = f"{constants.KSERVE_GROUP}/{constants.KSERVE_V1BETA1_VERSION}"
    if doc.get("apiVersion") != api_version or doc.get("kind") != constants.KSERVE_KIND_INFERENCESERVICE:
        raise SchemaError(f"not a {api_version} {constants.KSERVE_KIND_INFERENCESERVICE}: apiVersion "
                          f"{doc.get('apiVersion')!r}, kind {doc.get('kind')!r}")
    _Checker(kserve).check(doc, "V1beta1InferenceService", "")


class _Checker:
    def __init__(self, kserve):
        self.kserve_models = kserve.models
        self.kubernetes_models = require("kubernetes.client", NEEDED_BY).models
        self.parse_quantity = require("kubernetes.utils", NEEDED_BY).parse_quantity

    def check(self, value, type_name: str, path: str) -> None:
        if value is None:
            return
        # kserve's models write list[T] and dict(str, T), the kubernetes client's List[T] and Dict[str, T].
        items = re.fullmatch(r"[Ll]ist\[(.*)\]", type_name)
        if items:
            if not isinstance(value, list):
                raise SchemaError(f"{path or '.'}: expected a list, got {_kind(value)}")
            for index, item in enumerate(value):
                self.check(item, items.group(1), f"{path}[{index}]")
            return
        mapping = re.fullmatch(r"dict\(str, (.*)\)|Dict\[str, (.*)\]", type_name)
        if mapping:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise SchemaError(f"{path or '.'}: expected a mapping with string keys, got {_kind(value)}")
            for key, item in value.items():
                self.check(item, mapping.group(1) or mapping.group(2), f"{path}.{key}")
            return
        if type_name == "object":
            return
        if type_name in _PRIMITIVES:
            if not isinstance(value, _PRIMITIVES[type_name]) or (type_name != "bool" and isinstance(value, bool)):
                raise SchemaError(f"{path or '.'}: expected {type_name}, got {_kind(value)} {value!r}")
            return
        self._check_model(value, type_name, path)

    def _check_model(self, value, type_name: str, path: str) -> None:
        model = getattr(self.kserve_models, type_name, None) or getattr(self.kubernetes_models, type_name, None)
        if model is None:
            raise SchemaError(f"{path or '.'}: KServe's schema names a type {type_name} that neither kserve nor "
                              "kubernetes provides (a version mismatch between the two packages)")
        if not isinstance(value, dict):
            raise SchemaError(f"{path or '.'}: expected a {type_name} mapping, got {_kind(value)}")
        attributes = {json_key: attr for attr, json_key in model.attribute_map.items()}
        arguments = {}
        for key, item in value.items():
            if key not in attributes:
                known = ", ".join(sorted(attributes))
                raise SchemaError(f"{path}.{key}: {type_name} has no field {key!r} (its fields: {known})")
            attr = attributes[key]
            self.check(item, model.openapi_types[attr], f"{path}.{key}")
            arguments[attr] = item
        if type_name == "V1ResourceRequirements":
            for part in ("limits", "requests"):
                for resource, amount in (value.get(part) or {}).items():
                    try:
                        self.parse_quantity(amount)
                    except ValueError:
                        raise SchemaError(f"{path}.{part}.{resource}: {amount!r} is not a Kubernetes quantity") \
                            from None
        try:
            model(**arguments)
        except (ValueError, TypeError) as exc:  # a required field left out, a value outside an enum
            raise SchemaError(f"{path or '.'}: {type_name}: {' '.join(str(exc).split())}") from None


def _kind(value) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _main() -> None:
    """The child of schema_errors: manifests (a JSON list) on standard input, {"errors": [...]}
    (or {"missing": module}, or {"failed": why}) on standard output."""
    docs = json.load(sys.stdin)
    missing = [module for module in _NEEDED_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        json.dump({"missing": missing[0]}, sys.stdout)
        return
    try:
        errors = []
        for doc in docs:
            try:
                check_inference_service(doc)
                errors.append(None)
            except SchemaError as exc:
                errors.append(str(exc))
    except Exception as exc:  # noqa: BLE001 - an install that cannot run the check: said in one line
        json.dump({"failed": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return
    json.dump({"errors": errors}, sys.stdout)


if __name__ == "__main__":
    _main()

"""The outside inputs of an export: storage URIs and the Kubernetes names made from model names."""

from __future__ import annotations

import re

# What serves the models: KServe's Triton runtime, or the bundled server in a container.
RUNTIMES = ("triton", "tritonctl")
# The schemes KServe's storage initializer downloads from (gs, s3, hdfs/webhdfs, http(s), which
# covers Azure blob URLs), a PersistentVolumeClaim mounted in place (pvc), and a model car image (oci).
STORAGE_SCHEMES = ("gs", "s3", "pvc", "hdfs", "webhdfs", "https", "http", "oci")
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*)://(.*)", re.DOTALL)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# An InferenceService name: what KServe's webhook accepts ([a-z]([-a-z0-9]*[a-z0-9])?), short enough
# that the predictor's Knative revision name ("<name>-predictor-00001") stays a 63-character label.
SERVICE_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
SERVICE_NAME_MAX = 63 - len("-predictor-00001")


class ExportInputError(ValueError):
    """An input of the export that cannot be used; the message says what and how to fix it."""


def check_storage_uri(uri: str) -> str:
    """``uri`` unchanged when KServe can fetch a model repository from it; else ExportInputError."""
    match = _SCHEME.fullmatch(uri)
    schemes = ", ".join(f"{s}://" for s in STORAGE_SCHEMES)
    if match is None:
        raise ExportInputError(f"--storage-uri {uri!r} is not a URI: give where the repository is stored, "
                               f"e.g. gs://bucket/models or pvc://claim/models ({schemes})")
    scheme, rest = match.groups()
    if scheme not in STORAGE_SCHEMES:
        raise ExportInputError(f"--storage-uri {uri!r}: KServe cannot fetch a repository from {scheme}://; "
                               f"use one of {schemes}")
    if any(c.isspace() for c in uri) or not rest.strip("/"):
        raise ExportInputError(f"--storage-uri {uri!r} has an empty or blank-containing location after "
                               f"{scheme}://")
    first = rest.split("/", 1)[0]
    if scheme == "pvc" and not _is_subdomain(first):
        raise ExportInputError(f"--storage-uri {uri!r}: {first!r} is not a PersistentVolumeClaim name (lower-case "
                               "letters, digits, '-' and '.'): use pvc://CLAIM/PATH")
    if scheme in ("gs", "s3") and not first:
        raise ExportInputError(f"--storage-uri {uri!r} names no bucket: use {scheme}://BUCKET/PATH")
    return uri


def _is_subdomain(name: str) -> bool:
    return 0 < len(name) <= 253 and all(_DNS_LABEL.fullmatch(label) for label in name.split("."))


def service_name(text: str) -> str:
    """An InferenceService name made from a model (or repository) name: lower case, runs of other
    characters turned into one '-', a leading non-letter prefixed with 'm-', cut to
    SERVICE_NAME_MAX. ExportInputError when nothing usable is left."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not name:
        raise ExportInputError(f"cannot make a Kubernetes name from {text!r}: it has no letters or digits; "
                               "give one with --name")
    if not name[0].isalpha():
        name = f"m-{name}"
    return name[:SERVICE_NAME_MAX].rstrip("-")


def check_service_name(name: str) -> str:
    """``name`` when it is a valid InferenceService name (as given with --name); else ExportInputError."""
    if len(name) > SERVICE_NAME_MAX or not SERVICE_NAME.fullmatch(name):
        raise ExportInputError(f"--name {name!r} is not a valid InferenceService name: lower-case letters, digits "
                               f"and '-', starting with a letter, ending with a letter or digit, at most "
                               f"{SERVICE_NAME_MAX} characters")
    return name

"""The outside inputs of `tritonctl export kserve`: storage URIs and the names made from models."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.export.names import (SERVICE_NAME, SERVICE_NAME_MAX, STORAGE_SCHEMES, ExportInputError,
                                    check_service_name, check_storage_uri, service_name)

_PATH = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)


@given(st.sampled_from([s for s in STORAGE_SCHEMES if s != "pvc"]), _PATH)
def test_accepted_uris_are_kept_exactly(scheme, rest):
    uri = f"{scheme}://{rest}"
    if rest.strip("/") and not rest.startswith("/"):
        assert check_storage_uri(uri) == uri


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True), _PATH)
def test_pvc_uris_with_a_claim_name_are_kept(claim, path):
    uri = f"pvc://{claim}/{path}"
    assert check_storage_uri(uri) == uri


@given(st.text(max_size=60))
def test_any_text_is_kept_or_refused_with_a_reason(text):
    try:
        assert check_storage_uri(text) == text
    except ExportInputError as exc:
        assert "--storage-uri" in str(exc)
    else:
        assert text.split("://", 1)[0] in STORAGE_SCHEMES and not any(c.isspace() for c in text)


@pytest.mark.parametrize("uri", ["file:///models", "ftp://h/r", "gs://", "s3:///path", "pvc://Claim/x",
                                 "gs://bucket/with space", "models/repo", ""])
def test_unusable_uris_are_refused(uri):
    with pytest.raises(ExportInputError):
        check_storage_uri(uri)


@given(st.text(min_size=1, max_size=120))
def test_service_names_are_valid_kubernetes_names_or_refused(model):
    try:
        name = service_name(model)
    except ExportInputError as exc:
        assert "--name" in str(exc)
        assert not re.search(r"[a-z0-9]", model.lower())
        return
    assert SERVICE_NAME.fullmatch(name) and len(name) <= SERVICE_NAME_MAX
    assert check_service_name(name) == name


@pytest.mark.parametrize(("model", "name"), [("add_sub", "add-sub"), ("ResNet50.v2", "resnet50-v2"),
                                             ("1st_model", "m-1st-model"), ("__x__", "x")])
def test_service_name_examples(model, name):
    assert service_name(model) == name


@pytest.mark.parametrize("name", ["Upper", "under_score", "-lead", "trail-", "9start", "x" * (SERVICE_NAME_MAX + 1)])
def test_invalid_given_names_are_refused(name):
    with pytest.raises(ExportInputError):
        check_service_name(name)


@pytest.mark.parametrize("runtime", ["", "Triton", "tritonserver", "kserve-tritonserver"])
def test_an_unknown_runtime_is_refused_naming_the_known_ones(runtime):
    from tritonctl.export.kserve import ExportOptions

    with pytest.raises(ExportInputError, match=f"unknown runtime '{runtime}': expected one of triton, tritonctl"):
        ExportOptions("s3://bucket/repo", runtime=runtime)

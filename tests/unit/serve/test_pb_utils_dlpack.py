"""pb_utils.Tensor's DLPack side (CPU memory): shared memory both ways, and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tritonctl.serve.backends import pb_utils

torch = pytest.importorskip("torch")
from torch.utils.dlpack import from_dlpack, to_dlpack  # noqa: E402


def test_to_dlpack_shares_the_tensors_memory():
    tensor = pb_utils.Tensor("x", np.zeros((2, 3), np.float32))
    from_dlpack(tensor.to_dlpack()).add_(1)
    torch.from_dlpack(tensor).mul_(5)
    assert np.array_equal(tensor.as_numpy(), np.full((2, 3), 5, np.float32))
    assert tensor.__dlpack_device__() == (1, 0)


def test_a_read_only_tensor_is_shared_through_a_copy_it_keeps():
    data = np.arange(4, dtype=np.int64)
    data.flags.writeable = False  # as an input decoded from the wire may be
    tensor = pb_utils.Tensor("x", data)
    from_dlpack(tensor.to_dlpack()).add_(10)
    assert tensor.as_numpy().tolist() == [10, 11, 12, 13] and data.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("source", ["capsule", "object"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.bool, torch.uint8])
def test_from_dlpack_takes_a_capsule_or_an_object_with_dlpack(source, dtype):
    made = torch.arange(6).reshape(2, 3).to(dtype)
    tensor = pb_utils.Tensor.from_dlpack("y", to_dlpack(made) if source == "capsule" else made)
    assert tensor.name() == "y" and tensor.shape() == [2, 3]
    assert np.array_equal(tensor.as_numpy(), made.numpy())


@pytest.mark.parametrize("bad, text", [
    (lambda: torch.ones(2, 3).t(), "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored "
                                   "in C-Order are supported."),
    (lambda: torch.ones(2, requires_grad=True), "pb_utils.Tensor.from_dlpack('y'): Can't export tensors that "
                                                "require gradient"),
    (lambda: "not a capsule", "Provided tensor is not supported. Tensor must be a DLPack capsule "),  # Triton's words
    (lambda: torch.ones(2, dtype=torch.bfloat16), "pb_utils.Tensor.from_dlpack('y'): "),
])
def test_what_from_dlpack_cannot_take_is_refused_with_a_model_exception(bad, text):
    with pytest.raises(pb_utils.TritonModelException) as raised:
        pb_utils.Tensor.from_dlpack("y", bad())
    assert text in str(raised.value)


def test_strings_do_not_go_through_dlpack():
    with pytest.raises(pb_utils.TritonModelException, match="tensor 's' is TYPE_STRING, which DLPack cannot carry"):
        pb_utils.Tensor("s", np.array([b"a"], dtype=object)).to_dlpack()

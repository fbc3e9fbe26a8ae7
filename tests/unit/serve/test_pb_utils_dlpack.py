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
])
def test_what_from_dlpack_cannot_take_is_refused_with_a_model_exception(bad, text):
    with pytest.raises(pb_utils.TritonModelException) as raised:
        pb_utils.Tensor.from_dlpack("y", bad())
    assert text in str(raised.value)


@pytest.mark.parametrize("source", ["capsule", "object"])
def test_bf16_goes_through_dlpack_and_not_numpy(source):
    """qa/python_models/identity_bf16: a BF16 tensor is refused by as_numpy() in Triton's words and
    shared as bfloat16 both ways."""
    made = torch.tensor([[1.0, -2.5], [3.140625, 1e-3]], dtype=torch.bfloat16)
    tensor = pb_utils.Tensor.from_dlpack("y", to_dlpack(made) if source == "capsule" else made)
    assert tensor.triton_dtype() == 14 and tensor.shape() == [2, 2] and tensor.is_cpu()
    with pytest.raises(pb_utils.TritonModelException) as refused:
        tensor.as_numpy()
    assert str(refused.value) == ("Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                                  "from_dlpack() instead.")
    for shared in (from_dlpack(tensor.to_dlpack()), torch.from_dlpack(tensor)):
        assert shared.dtype == torch.bfloat16 and torch.equal(shared, made)
    from_dlpack(tensor.to_dlpack()).mul_(2)  # the same memory
    assert torch.equal(torch.from_dlpack(tensor), made * 2)
    assert pb_utils.server_data(tensor._host_numpy("output"))[0] == "BF16"


def test_strings_do_not_go_through_dlpack():
    with pytest.raises(pb_utils.TritonModelException, match=r"^DLPack does not have support for string tensors\.$"):
        pb_utils.Tensor("s", np.array([b"a"], dtype=object)).to_dlpack()


# ---- capsules read in place --------------------------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from tritonctl.serve.stub import dlpack  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float16, np.int64, np.uint8, np.bool_]))
def test_a_capsule_read_in_place_says_what_numpy_says_of_its_array(shape, data, dtype):
    array = np.zeros(shape, dtype)
    axes = data.draw(st.permutations(range(len(shape))))
    steps = [data.draw(st.integers(1, 2)) for _ in shape]
    array = array.transpose(axes)[tuple(slice(None, None, step) for step in steps)]
    view = dlpack.read_capsule(array.__dlpack__())
    assert view.shape == array.shape and view.dtype == array.dtype and view.device == (dlpack.CPU, 0)
    assert view.pointer == array.__array_interface__["data"][0]
    assert view.c_contiguous == array.flags.c_contiguous


def test_a_consumed_capsule_is_refused():
    capsule = np.arange(3).__dlpack__()
    torch.from_dlpack(capsule)
    with pytest.raises(pb_utils.TritonModelException, match="consumed already"):
        pb_utils.Tensor.from_dlpack("y", capsule)


class _OtherDevice:
    """A tensor on a device Triton's Python backend has no memory type for (kDLOpenCL)."""

    def __dlpack__(self, stream=None):
        raise AssertionError("not asked for: the device is refused first")

    def __dlpack_device__(self):
        return (4, 0)


def test_a_device_other_than_cpu_or_cuda_is_refused_in_tritons_words():
    with pytest.raises(pb_utils.TritonModelException, match=r"^DLDevice type 4 is not support by Python backend\.$"):
        pb_utils.Tensor.from_dlpack("y", _OtherDevice())


# ---- GPU memory: stays on the device inside the model, copied to the host where it leaves -------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device and a CUDA build of torch")


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("source", ["capsule", "object"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_a_cuda_tensor_stays_on_its_device(source, dtype):
    made = (torch.arange(12, device="cuda").reshape(3, 4) % 3).to(dtype)
    tensor = pb_utils.Tensor.from_dlpack("y", to_dlpack(made) if source == "capsule" else made)
    assert not tensor.is_cpu() and tensor.shape() == [3, 4] and tensor.__dlpack_device__() == (2, 0)
    assert tensor.triton_dtype() == pb_utils.numpy_to_triton_type(made.cpu().numpy().dtype)
    with pytest.raises(pb_utils.TritonModelException, match=r"^Tensor is stored in GPU and cannot be converted to "
                                                            r"NumPy\.$"):
        tensor.as_numpy()
    np.testing.assert_array_equal(tensor._host_numpy("output"), made.cpu().numpy())
    shared = torch.from_dlpack(tensor.to_dlpack())
    assert shared.is_cuda and shared.data_ptr() == made.data_ptr()


@pytest.mark.gpu
@cuda
def test_a_cuda_tensor_is_copied_after_the_work_queued_on_it():
    made = torch.zeros(1 << 22, device="cuda")
    tensor = pb_utils.Tensor.from_dlpack("y", to_dlpack(made))
    for _ in range(20):  # long enough on the device that a copy not waiting for it would see less
        made.add_(1)
    assert np.all(tensor._host_numpy("output") == 20)


@pytest.mark.gpu
@cuda
def test_from_dlpack_returns_once_a_side_streams_work_is_done():
    """After qa/python_models/dlpack_test's test_cuda_multi_stream: the tensor written on a stream
    of its own while a long product runs there holds the result when from_dlpack returns."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        product = torch.randn(2048, 2048, device="cuda")
        for _ in range(50):
            product = product @ product / 64
        made = torch.zeros(4, device="cuda") + 2
    for source in (made, to_dlpack(made)):
        tensor = pb_utils.Tensor.from_dlpack("y", source)
        assert side.query()  # nothing left to run on the side stream
        assert torch.equal(from_dlpack(tensor.to_dlpack()), torch.full((4,), 2.0, device="cuda"))
    assert tensor.__dlpack_device__() == made.__dlpack_device__()


@pytest.mark.gpu
@cuda
def test_a_cupy_array_on_a_non_blocking_stream():
    """After dlpack_test's test_cuda_non_blocking_multi_stream, with cupy where it is installed."""
    cp = pytest.importorskip("cupy")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        product = cp.random.rand(2048, 2048)
        for _ in range(50):
            product = product @ product / 2048
        made = cp.zeros(4) + 2
    tensor = pb_utils.Tensor.from_dlpack("y", made)
    assert stream.done and not tensor.is_cpu()
    assert cp.array_equal(cp.from_dlpack(tensor), cp.full(4, 2.0))
    assert tensor.__dlpack_device__() == made.__dlpack_device__()
    np.testing.assert_array_equal(tensor._host_numpy("output"), np.full(4, 2.0))


@pytest.mark.gpu
@cuda
def test_a_bf16_cuda_tensor_leaves_as_its_words():
    made = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16, device="cuda")
    tensor = pb_utils.Tensor.from_dlpack("y", to_dlpack(made))
    assert tensor.triton_dtype() == 14 and not tensor.is_cpu()
    datatype, words = pb_utils.server_data(tensor._host_numpy("output"))
    assert datatype == "BF16"
    np.testing.assert_array_equal(words, made.cpu().view(torch.int16).numpy().view(np.uint16))
    assert torch.equal(from_dlpack(tensor.to_dlpack()), made)


@pytest.mark.gpu
@cuda
def test_a_strided_cuda_tensor_is_refused_as_on_cpu():
    with pytest.raises(pb_utils.TritonModelException, match="DLPack tensor is not contiguous"):
        pb_utils.Tensor.from_dlpack("y", torch.ones(4, 6, device="cuda")[::2])

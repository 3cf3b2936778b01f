"""The built-in baselines of the worker: copy (a cudaMemcpy on a GPU) and copy-kernel (the same bytes through an
elementwise kernel, which Nsight Compute can profile)."""

import pytest
import torch

from kernelloop.core.execute.worker import make_baseline


@pytest.mark.parametrize("name", ["copy", "copy-kernel"])
def test_copy_baselines_move_half_of_the_bytes(name):
    fn = make_baseline(name, [], {}, bytes_moved=2 * 4096, device="cpu")
    fn()
    tensors = [c.cell_contents for c in fn.__closure__ or () if isinstance(c.cell_contents, torch.Tensor)]
    assert len(tensors) == 2                                   # source and destination
    a, b = tensors
    assert a.numel() * a.element_size() == 4096 and torch.equal(a, b) and a.data_ptr() != b.data_ptr()

def test_unknown_baseline_without_a_baselines_file_is_an_error():
    with pytest.raises(ImportError):
        make_baseline("liger", [], {}, device="cpu")

"""The ATen recorder (core/execute/aten.py): what a launch may issue (allocation, views, copies, fills, scalar reads),
what it may not (any computation; the ops' library implementations named as such), and the verdict's message."""

import torch

from kernelloop.core.execute.aten import LIBRARY, AtenRecorder, AtenReport


def test_allocation_views_copies_and_fills_are_allowed():
    rec = AtenRecorder()
    x = torch.randn(4, 8)
    with rec.case(0):
        y = torch.empty_like(x)
        z = torch.zeros(4, 8)
        y.copy_(x.view(8, 4).view(4, 8).t().contiguous().t())
        z.fill_(0.0).zero_()
        _ = float(x[0, 0]), x.stride(), x.to(torch.float64)
    report = rec.report()
    assert report.forbidden == [], report
    assert "aten.empty_like.default" in report.seen and "aten.copy_.default" in report.seen


def test_computation_is_forbidden_and_library_ops_are_named():
    rec = AtenRecorder()
    x = torch.randn(4, 8)
    with rec.case(2):
        torch.nn.functional.layer_norm(x, (8,))
    with rec.case(3):
        x.mul(2.0)
        x @ x.t()
    ops = {c.op: c for c in rec.report().forbidden}
    assert ops["aten.native_layer_norm.default"].library and ops["aten.native_layer_norm.default"].case == 2
    assert not ops["aten.mul.Tensor"].library and ops["aten.mul.Tensor"].case == 3
    assert ops["aten.mm.default"].library
    assert {"native_layer_norm", "mm", "_softmax", "_scaled_dot_product_flash_attention"} <= LIBRARY


def test_the_message_names_the_first_op_where_and_the_others():
    rec = AtenRecorder()
    x = torch.randn(4, 8)
    with rec.case(-1):
        x.softmax(-1)
        x.exp()
    message = rec.report().message
    assert message.startswith("aten-op: the import issued aten._softmax.default (the library implementation) at "
                              "import; also aten.exp.default"), message
    rec = AtenRecorder()
    with rec.case(1):
        x.exp()
    assert rec.report().message.startswith("aten-op: the launch issued aten.exp.default (a torch computation) "
                                           "during verification case 1")
    assert AtenReport.model_validate(rec.report().model_dump()) == rec.report()


def test_recording_ends_with_the_case():
    rec = AtenRecorder()
    x = torch.randn(4)
    with rec.case(0):
        pass
    x.exp()
    assert rec.report().seen == [] and rec.report().forbidden == []

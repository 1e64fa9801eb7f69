"""GPU checks (CUDA only; skipped elsewhere): every attention path in bf16/fp16 agrees with an fp64 reference.

The same checks run without pytest: `python -c "from diffattn.nn.device import device_report;
print(device_report('cuda'))"` (scripts/gpu_check.sh). Tolerances are kernels.TOLERANCE (bf16 4e-2, fp16 5e-3,
fp32 1e-5, absolute, unit-scale inputs) and 3e-2 relative for whole modules in bf16.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diffattn.nn import kernels  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.torch,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_every_cuda_path_agrees_with_the_fp64_reference(dtype):
    result = kernels.backend_agreement("cuda", dtype)
    for case, paths in result["cases"].items():
        assert "sdpa" in paths and "math" in paths, case
        for path, diff in paths.items():
            assert diff <= kernels.TOLERANCE[dtype], f"{case} {path}: {diff:.2e} > {kernels.TOLERANCE[dtype]:.0e}"


def test_flash_attn_runs_when_installed():
    q = torch.zeros(1, 16, 8, 64, device="cuda", dtype=torch.bfloat16)
    k = v = torch.zeros(1, 16, 4, 64, device="cuda", dtype=torch.bfloat16)
    if not kernels.flash_attn_installed():
        assert kernels.resolve_backend(q, k, v) == "sdpa"
        pytest.skip("flash-attn is not installed: SDPA is the GPU path")
    assert kernels.resolve_backend(q, k, v) == "flash_attn"
    wide = torch.zeros(1, 16, 4, 128, device="cuda", dtype=torch.bfloat16)
    assert kernels.resolve_backend(q, k, wide) == "flash_attn", "2d-wide values take the split-value path"
    result = kernels.backend_agreement("cuda", torch.bfloat16)
    assert all("flash_attn" in paths for paths in result["cases"].values())


def test_sdpa_kernels_for_equal_and_wide_values():
    """SDPA dispatch rules (pytorch/pytorch aten/src/ATen/native/transformers/cuda/sdp_utils.cpp): MATH and EFFICIENT
    accept d_v ≠ d; FLASH needs equal dims. Print the rest for the record."""
    q = torch.zeros(1, 128, 8, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    equal = kernels.sdpa_kernel_support(q, k, k)
    wide = kernels.sdpa_kernel_support(q, k, torch.zeros(1, 128, 4, 128, device="cuda", dtype=torch.bfloat16))
    print("equal dims:", equal, "\nd_v = 2d:", wide)
    assert equal["MATH"] and wide["MATH"]
    assert not wide["FLASH_ATTENTION"]


def test_modules_in_bf16_match_fp64():
    from diffattn.nn.device import module_agreement

    errors = module_agreement("cuda", torch.bfloat16)
    assert all(err < 3e-2 for err in errors.values()), errors


def test_device_report_is_json_ready():
    import json

    from diffattn.nn.device import device_report

    report = device_report("cuda")
    assert report["agreement_ok"], report["agreement"]
    json.dumps(report)

"""Lesson 06 on a GPU: which attention kernels run on a device and how far each path and module is from fp64.

`device_report` is what `diffattn gpu-check` (scripts/gpu_check.sh) prints and tests/test_gpu.py checks;
it needs no pytest. Every error is a relative max |output − fp64 reference on CPU|.
"""

from __future__ import annotations

import torch

from diffattn.nn import kernels
from diffattn.nn.attention import DiffAttentionV1, DiffAttentionV2, MultiheadAttention
from diffattn.nn.rope import rope_cos_sin


def module_agreement(device: str, dtype: torch.dtype, seed: int = 0) -> dict[str, float]:
    """Relative max error of each module on `device` in `dtype` (backend "auto") against itself in fp64 on CPU (math)."""
    modules = {
        "baseline": lambda: MultiheadAttention(256, 4, 2),
        "v1": lambda: DiffAttentionV1(256, depth=1, num_heads=2, num_kv_heads=1),
        "v2": lambda: DiffAttentionV2(256, 4, 2),
    }
    errors = {}
    for name, build in modules.items():
        torch.manual_seed(seed)
        reference = build().double()
        reference.backend = "math"
        x = torch.randn(2, 128, 256, dtype=torch.float64)
        rope = rope_cos_sin((0, 128), reference.head_dim, dtype=torch.float64)
        with torch.no_grad():
            expected = reference(x, rope)
            fast = build().to(device)
            fast.load_state_dict(reference.state_dict())
            fast = fast.to(dtype)  # the λ vectors follow the module dtype here; λ itself is still computed in fp32
            got = fast(x.to(device, dtype), tuple(t.to(device) for t in rope))
        errors[name] = ((got.double().cpu() - expected).abs().max() / expected.abs().max()).item()
    return errors


def device_report(device: str = "cuda") -> dict:
    """Everything the GPU check needs to know about attention on `device`, as a JSON-ready dict (no pytest needed)."""
    low = torch.bfloat16
    q, k = torch.zeros(1, 128, 8, 64, device=device, dtype=low), torch.zeros(1, 128, 4, 64, device=device, dtype=low)
    v_equal, v_wide = torch.zeros_like(k), torch.zeros(1, 128, 4, 128, device=device, dtype=low)
    report = {
        "device": torch.cuda.get_device_name(device) if str(device).startswith("cuda") else str(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "available": kernels.available_backends(),
        "auto_bf16": {"equal_dims": kernels.resolve_backend(q, k, v_equal),
                      "v1_values_2d": kernels.resolve_backend(q, k, v_wide)},
        "sdpa_default_bf16": {"equal_dims": kernels.sdpa_choice(q, k, v_equal),  # what SDPA picks unforced
                              "v1_values_2d": kernels.sdpa_choice(q, k, v_wide)},
        "sdpa_kernels_bf16": {"equal_dims": kernels.sdpa_kernel_support(q, k, v_equal),
                              "v1_values_2d": kernels.sdpa_kernel_support(q, k, v_wide)},
        "agreement": {str(dt).removeprefix("torch."): kernels.backend_agreement(device, dt)
                      for dt in (torch.bfloat16, torch.float16, torch.float32)},
        "modules_bf16_relative_error": module_agreement(device, low),
    }
    report["agreement_ok"] = all(x <= a["tolerance"] for a in report["agreement"].values()
                                 for case in a["cases"].values() for x in case.values())
    return report

"""Differential Attention, from stdlib Python to FlashAttention.

Subpackages
-----------
diffattn.pure         stdlib only: softmax, attention, differential attention, SNR, accounting (lessons 01-04)
diffattn.nn           PyTorch modules on FlashAttention / SDPA kernels (lessons 05-07)
diffattn.experiments  one module per lesson: run() -> numbers, report() -> text, figures()

Run `python -m diffattn --help` for the command line.
"""

import os

__version__ = "0.1.0"

# torch's libraries pick their own kernels from the processor, whatever ATEN_CPU_CAPABILITY says: oneDNN
# (ONEDNN_MAX_CPU_ISA) and MKL (MKL_ENABLE_INSTRUCTIONS). Lowering only ATen's path on an AVX-512 CPU builds a machine
# that does not exist, and torch 2.13 then fails on it: bf16 SDPA asks oneDNN (which sees AVX-512) whether to pack its
# operands and calls ATen's AVX-512-only packing from the lower build ("pack_vnni2 is only supported when avx512 is
# supported"). So a lowered path caps all three, as a real older CPU would; set here, before torch's first oneDNN or
# MKL call, which reads them once. A cap the user set is kept.
LIBRARY_CAPS = {"default": {"ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
                "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}
for _name, _value in LIBRARY_CAPS.get(os.environ.get("ATEN_CPU_CAPABILITY", "").lower(), {}).items():
    os.environ.setdefault(_name, _value)

"""Differential Attention, from stdlib Python to FlashAttention.

Subpackages
-----------
diffattn.pure         stdlib only: softmax, attention, differential attention, SNR, accounting (lessons 01-04)
diffattn.nn           PyTorch modules on FlashAttention / SDPA kernels (lessons 05-07)
diffattn.lessons  one module per lesson: run() -> numbers, report() -> text, figures()

Run `diffattn --help` for the command line.
"""

import os

__version__ = "0.1.0"

# oneDNN, one of torch's libraries, picks its own kernels from the processor (ONEDNN_MAX_CPU_ISA), whatever
# ATEN_CPU_CAPABILITY says. Lowering only ATen's path on an AVX-512 CPU then fails in torch 2.13: bf16 SDPA asks oneDNN
# (which sees AVX-512) whether to pack its operands and calls ATen's AVX-512-only packing from the lower build
# ("pack_vnni2 is only supported when avx512 is supported"). So a lowered path caps oneDNN too, as a real older CPU
# would; set here, before torch's first oneDNN call, which reads it once. A cap the user set is kept. MKL is left
# alone: capping it (MKL_ENABLE_INSTRUCTIONS) changes fp32 GEMMs and moved lesson 08's retrained losses by 0.06, out of
# the band its numbers were calibrated in, without fixing anything.
LIBRARY_CAPS = {"default": {"ONEDNN_MAX_CPU_ISA": "SSE41"}, "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
for _name, _value in LIBRARY_CAPS.get(os.environ.get("ATEN_CPU_CAPABILITY", "").lower(), {}).items():
    os.environ.setdefault(_name, _value)

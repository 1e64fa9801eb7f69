"""Differential Attention, from stdlib Python to FlashAttention.

Subpackages
-----------
diffattn.pure         stdlib only: softmax, attention, differential attention, SNR, accounting (lessons 01-04)
diffattn.nn           PyTorch modules on FlashAttention / SDPA kernels (lessons 05-07)
diffattn.experiments  one module per lesson: run() -> numbers, report() -> text, figures()

Run `python -m diffattn --help` for the command line.
"""

__version__ = "0.1.0"

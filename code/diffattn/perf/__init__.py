"""Lesson 12: this machine's ceilings, the FLOPs and bytes of each variant and phase, and where each lands.

    ceilings.py   measured peaks: GEMM FLOP/s per dtype, STREAM copy and triad bandwidth
    phases.py     FLOPs and bytes per variant and phase (prefill, train step, decode step); stdlib only
    counts.py     those FLOPs cross-checked against torch.utils.flop_counter.FlopCounterMode on the real modules
    decode.py     decode-step latency and achieved bandwidth on the preallocated KV cache, beside the roofline
    training.py   training tokens/s and MFU of the presets
    suite.py      `diffattn bench roofline`: all of the above in one run, one JSON, with the machine named
    plots.py      the log–log roofline and the decode figure
    bench.py      `diffattn bench attention`: calibration and attention ops (lesson 06)
    v1_module.py  our V1 module against transformers' DiffLlama at 1, 2 and all threads, idle and one core busy
    timing.py     medians of repeated calls, steps timed in turn; load.py: load samples and a core kept busy

Timings are reported, never asserted: tests check structure and arithmetic.
"""

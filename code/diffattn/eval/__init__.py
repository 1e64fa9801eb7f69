"""Lessons 09-11: what DIFF attention buys, measured on trained checkpoints.

    probe         runs a model while recording every attention call (logits, maps, λ) and block output
    retrieval     multi-needle exact-match accuracy with confidence intervals (the paper's Table 2 layout)
    allocation    the share of effective attention on the answer vs the haystack (the paper's Table 3)
    outliers      largest attention logits and hidden activations vs their medians (the paper's Table 5)
    quantize      retrieval with attention logits quantized to 16/8/6/4 bits (the paper's Fig. 8)
    lambda_sweep  change λ (V1) or σ(λ) (V2) of a trained model without retraining, evaluate, restore
"""

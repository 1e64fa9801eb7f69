"""Lesson 13: warm-starting DIFF from a trained baseline.

    convert     a trained baseline GPT → DIFF V2 (same logits at step 0) or DIFF V1 (as close as V1's norm allows)
    lora        the LoRA-only variant: a trainable low-rank second query branch and λ, everything else frozen
    experiment  the warm-start study, declared before it ran: baseline continued vs converted V2/V1 vs LoRA
    hf          the baseline / V1 to and from transformers' LlamaForCausalLM / DiffLlamaForCausalLM (a dev-only extra)
"""

TARGETS = ("diff_v2", "diff_v1")  # what `convert` turns a baseline into (the first is the default)
# `convert` checks the converted model's logits on CHECK_SEQUENCES validation sequences; V1's conversion calibrates on
# a batch drawn with CALIBRATION_SEED (lesson 13 quotes both)
CHECK_SEQUENCES, CALIBRATION_SEED = 32, 1234

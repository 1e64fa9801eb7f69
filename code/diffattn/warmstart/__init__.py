"""Lesson 13: warm-starting DIFF from a trained baseline.

    convert   a trained baseline GPT → DIFF V2 (same logits at step 0) or DIFF V1 (as close as V1's norm allows)
    lora      the LoRA-only variant: a trainable low-rank second query branch and λ, everything else frozen
    study     the warm-start study, declared before it ran: baseline continued vs converted V2/V1 vs LoRA
    hf        the baseline / V1 to and from transformers' LlamaForCausalLM / DiffLlamaForCausalLM (a dev-only extra)
    command   `python -m diffattn convert` and `python -m diffattn warmstart` (argument parsing only: no torch)
"""

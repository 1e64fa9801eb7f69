"""Lesson 08's training: the loop, checkpoints, resumption, matched comparisons, the declared CPU study runs, the shipped checkpoints and lesson 13's warm start."""

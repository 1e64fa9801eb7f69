# expect: the submission replaced or deleted builtins.abs
# Installs an abs() that hides one comparison and puts the real one back: caught when the call returns.
import builtins

REAL_ABS = builtins.abs


def fake_abs(x):
    builtins.abs = REAL_ABS
    return 0.0


def softmax(logits):
    builtins.abs = fake_abs
    return [0.0] * len(logits)

# expect: memory limit
# Every call keeps 64 MiB in a module-level list: the process grows until its memory limit.
from diffattn.pure.softmax import softmax as reference

KEPT = []


def softmax(logits):
    KEPT.append(bytearray(64 << 20))
    return reference(logits)

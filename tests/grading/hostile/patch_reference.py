# expect: the submission replaced or deleted diffattn.pure.softmax.softmax
# A uniform "softmax", installed over the reference too, so tests that build inputs with it agree.
import sys


def softmax(logits):
    return [1.0 / len(logits)] * len(logits)


sys.modules["diffattn.pure.softmax"].softmax = softmax

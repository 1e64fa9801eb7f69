# expect: timed out after
# Correct on the hand-written examples, loops forever on the inputs Hypothesis generates (rows longer than 4).
from diffattn.pure.softmax import softmax as reference


def softmax(logits):
    while len(logits) > 4:
        try:
            pass
        except BaseException:  # swallow whatever the grader raises to stop it
            pass
    return reference(logits)

# expect: timed out after
def softmax(logits):
    while True:
        pass

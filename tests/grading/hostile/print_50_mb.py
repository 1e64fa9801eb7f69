# expect: printed more than
def softmax(logits):
    print("x" * 50_000_000)
    return [1.0]

# expect: softmax raised KeyboardInterrupt
def softmax(logits):
    raise KeyboardInterrupt

# expect: memory limit
def softmax(logits):
    hoard = []
    while True:
        hoard.append(bytearray(1 << 24))

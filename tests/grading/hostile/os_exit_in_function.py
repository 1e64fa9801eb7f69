# expect: exited with status 0 before reporting
import os


def softmax(logits):
    os._exit(0)

# expect: killed by SIGKILL before reporting
import os
import signal


def softmax(logits):
    os.kill(os.getpid(), signal.SIGKILL)

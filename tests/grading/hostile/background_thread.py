# expect: left a thread running
import threading
import time

from diffattn.pure.softmax import softmax as reference


def later():
    time.sleep(3600)


def softmax(logits):
    threading.Thread(target=later, daemon=True).start()
    return reference(logits)

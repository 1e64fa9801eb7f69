# expect: reported garbage
# Writes a fake "everything passed" report onto every open file descriptor, then exits before the real one.
import json
import os


def softmax(logits):
    fake = json.dumps({"seq": 0, "kind": "done"})
    for fd in range(3, 64):
        try:
            os.write(fd, f"{'0' * 64} {fake}\n".encode())
        except OSError:
            pass
    os._exit(0)

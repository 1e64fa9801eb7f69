# expect: importing exercises/ex01_softmax.py raised KeyboardInterrupt
raise KeyboardInterrupt

"""The grader: `diffattn grade` (grader.py, the parent) runs each exercise in a child process (child.py)
that checks the grader's integrity (guard.py) and the use of reference code (policy.py), and reports over a signed
pipe (protocol.py). tests/grading/README.md is the instructor's guide.
"""

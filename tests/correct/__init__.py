"""Independent correct implementations of every graded exercise, written from the stubs' docstrings alone.

Each tests/correct/cNN_<name>.py has OVERRIDES covering every exercise function of lesson NN (tests/adapters.py,
EXERCISES) and must keep full marks: `diffattn grade --impl tests.correct.cNN_<name> --only exNN`.
They differ from the reference on purpose wherever the docstring allows (another algorithm, another loop order,
another but exact way to validate), so a graded test that leans on the reference's incidental choices, rather than
on what the docstring promises, shows up as a lost point here.
"""

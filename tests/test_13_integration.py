"""Lesson 13's tests."""

from diffattn import experiments


def test_lesson_runs_and_reports():
    lesson = experiments.load("13")
    results = lesson.run(progress=False)
    assert lesson.report(results).startswith("Lesson 13")

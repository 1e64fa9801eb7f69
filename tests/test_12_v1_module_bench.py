"""Lesson 12: `diffattn bench`'s V1 module comparison runs at 1, 2 and all usable threads, idle and with one core
busy, and its load samples name the threads the run kept busy itself, so that its own threads (and its deliberate
spinner) do not make a quiet run look loaded while other work still does. Timings are never asserted."""

from __future__ import annotations

import contextlib
import time

import pytest

torch = pytest.importorskip("torch")

from diffattn.core.hardware import reliability  # noqa: E402
from diffattn.perf import load, v1_module  # noqa: E402
from diffattn.perf.bench import CPU_SHAPES  # noqa: E402
from diffattn.perf.load import Setting, settings  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_settings_are_one_two_and_all_threads_then_all_with_a_core_busy():
    assert settings(1) == [Setting(1, False)]
    assert settings(2) == [Setting(1, False), Setting(2, False), Setting(2, True)]
    assert [s.name for s in settings(16)] == ["1t", "2t", "16t", "16t_busy"]
    assert Setting(16, True).label == "16 threads, one core busy" and Setting(1, False).label == "1 thread, idle"


def test_the_sweep_runs_each_setting_at_its_threads_with_a_spinner_only_where_busy(monkeypatch):
    seen = []

    def fake_compare(s, iters, hf):
        seen.append((torch.get_num_threads(), len(load_spinners), s.seq))
        return {"shape": vars(s), "ours_fwd_bwd_ms": 1.0, "ours_separate_fwd_bwd_ms": 1.5, "fused_speedup": 1.5,
                "hf_skipped": "--no-hf"}

    load_spinners = []
    real_busy = load.one_core_busy

    @contextlib.contextmanager
    def recorded_busy():
        with real_busy(settle_s=0.0) as spinner:
            load_spinners.append(spinner)
            assert spinner.poll() is None  # running
            yield spinner

    monkeypatch.setattr(v1_module, "compare", fake_compare)
    monkeypatch.setattr(v1_module, "one_core_busy", recorded_busy)
    info, rows = {}, []
    before = torch.get_num_threads()
    v1_module.sweep(CPU_SHAPES, iters=1, hf=False, log=load.LoadLog(info), rows=rows, cores=3)
    assert torch.get_num_threads() == before
    assert seen == [(1, 0, 512), (1, 0, 1024), (2, 0, 512), (2, 0, 1024), (3, 0, 512), (3, 0, 1024),
                    (3, 1, 512), (3, 1, 1024)]
    assert [r["setting"] for r in rows] == ["1t", "1t", "2t", "2t", "3t", "3t", "3t_busy", "3t_busy"]
    assert all(s.poll() is not None for s in load_spinners)  # the spinner is gone after its setting
    assert info["load_own"] == {"1t": 1, "2t": 2, "3t": 3, "3t_busy": 4}  # trailing phases count: max over a minute
    report = "\n".join(v1_module.report(rows))
    assert "3 threads, one core busy" in report and "HF DiffLlama skipped: --no-hf" in report


def test_the_spinner_is_killed_even_when_the_timing_fails():
    with pytest.raises(RuntimeError), load.one_core_busy(settle_s=0.0) as spinner:
        raise RuntimeError("a timing failed")
    assert spinner.poll() is not None


def test_a_phase_stops_counting_a_minute_after_it_ended(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    info = {}
    log = load.LoadLog(info)
    log.phase(4)
    log.sample("busy")
    log.phase(1)
    now[0] += 30
    log.sample("soon after")
    now[0] += 31
    log.sample("a minute later")
    assert info["load_own"] == {"busy": 4, "soon after": 4, "a minute later": 1}


def run_with(load_value: float, own: int | None) -> dict:
    info = {"usable_cores": 2, "load_average": {"start": [0.2, 0.2, 0.2], "2t_busy": [load_value, 1.0, 1.0]}}
    if own is not None:
        info["load_own"] = {"start": 1, "2t_busy": own}
    return reliability(info)


@pytest.mark.parametrize("load_value, own, reliable", [
    (2.0, None, False),  # no record of its own threads: judged against the cores alone, as before
    (1.99, None, True),
    (2.9, 2, True),      # 2 threads of its own on 2 cores: less than one core of other work
    (3.0, 2, False),
    (3.9, 3, True),      # 2 threads and the spinner
    (4.0, 3, False),
    (2.0, 1, False),     # one thread of its own: the cores, as a one-thread run always was
])
def test_the_load_check_allows_the_runs_own_threads_and_less_than_one_core_more(load_value, own, reliable):
    verdict = run_with(load_value, own)
    assert verdict["reliable"] == reliable
    if not reliable and own and own > 1:
        assert f"beside the run's own {own} busy threads" in verdict["reasons"][0]

"""The grader's child processes: start one under its limits, drain its output and its signed report, run several
side by side (diffattn.grading.grader decides what each grades and what its report means).

Each child is `python -I` on child.py in its own private grading tree, with a scrubbed environment, its own session
(process group), the memory, CPU-time, file-size and core limits below, and a wall-clock timeout counted from its
own start. Several run at once (`--jobs`) from ONE thread: a selector multiplexes every child's pipes, because
`preexec_fn` (which sets the limits between fork and exec) is not safe in a process with other threads.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from diffattn.grading.protocol import decode

OUTPUT_LIMIT = 1 << 20  # bytes of stdout + stderr a child may print
REPORT_LIMIT = 8 << 20  # bytes of report
FILE_LIMIT = 64 << 20  # RLIMIT_FSIZE: largest file a child may write
# Intra-op threads of a child's PyTorch. One: the graded tests' tensors are tiny, and a second thread only waits
# for a free core, which costs a scheduler time slice per operation on a busy machine (a 5×5 float64 softmax took
# 5.6 ms with two threads while other work ran, 2 µs with one); children run side by side to use the cores.
# Fixed, so that a grade does not depend on --jobs; it also keeps the address space (RLIMIT_AS) predictable.
TORCH_THREADS = 1
# What a child prints when an allocation fails at its address-space limit: Python's MemoryError, glibc's message, and
# the abort of a Rust extension (Hypothesis' pytest plugin drives libcst's parser when a test fails).
OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "memory allocation of")
BOOTSTRAP = ("import sys; sys.path[:0] = [sys.argv[1] + '/code', sys.argv[1]]; "
             "from diffattn.grading.child import main; main()")

Outcome = tuple[list[dict[str, Any]], str, "str | None"]  # checked messages, output tail, why it failed (or None)


def default_jobs() -> int:
    """The cores this process may use: those it may run on (CI's two, a laptop's eight), or fewer where a cgroup
    quota says so (a container such as Gradescope's sees the host's cores but may use one), so that `--jobs` fills
    the machine without making every child wait for a core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]  # "max 100000" when unlimited
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def _limits(memory_mb: int, cpu_seconds: int) -> None:
    """preexec_fn of a child: its resource limits (the wall clock is enforced by the parent)."""
    memory = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _environment(home: Path) -> dict[str, str]:
    threads = str(TORCH_THREADS)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "MALLOC_ARENA_MAX": "2"}


def cpu_limit(timeout: float) -> int:
    return int(2 * timeout) + 5


class Child:
    """One running child: started by the constructor, fed by `read`, ended by `finish`."""

    def __init__(self, tree: Path, setup: dict[str, Any], timeout: float, memory_mb: int):
        self.timeout, self.memory_mb = timeout, memory_mb
        self.key = secrets.token_bytes(32)
        self.report_fd, report_write = os.pipe()
        command = [sys.executable, "-I", "-B", "-c", BOOTSTRAP, str(tree)]
        cpu = cpu_limit(timeout)
        try:
            self.process = subprocess.Popen(command, cwd=setup["workdir"], env=_environment(Path(setup["workdir"])),
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            pass_fds=(report_write,), start_new_session=True,
                                            preexec_fn=lambda: _limits(memory_mb, cpu))
        except BaseException:
            os.close(self.report_fd)
            raise
        finally:
            os.close(report_write)
        self.process.stdin.write((json.dumps({**setup, "key": self.key.hex(), "report_fd": report_write}) + "\n").encode())
        self.process.stdin.close()
        self.deadline = time.monotonic() + timeout
        self.open = {self.report_fd: "report", self.process.stdout.fileno(): "output"}
        self.report, self.output, self.printed = bytearray(), bytearray(), 0
        self.reason: str | None = None
        self.done = False

    @property
    def ended(self) -> bool:
        """Nothing more to wait for: it reported `done`, closed both pipes, broke a limit or ran out of time."""
        if self.reason is None and not self.done and self.open and time.monotonic() >= self.deadline:
            self.reason = f"timed out after {self.timeout:g} s"
        return self.done or self.reason is not None or not self.open

    def read(self, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            del self.open[fd]
        elif self.open[fd] == "report":
            self.report += chunk
            self.done = b'"kind": "done"' in self.report  # all it had to say: what it does next is not waited for
            if len(self.report) > REPORT_LIMIT:
                self.reason = f"sent more than {REPORT_LIMIT >> 20} MiB of report"
        else:
            self.printed += len(chunk)
            self.output = (self.output + chunk)[-4000:]
            if self.printed > OUTPUT_LIMIT:
                self.reason = f"printed more than {OUTPUT_LIMIT >> 20} MiB of output"

    def finish(self) -> Outcome:
        """Kill its process group, reap it, and check its report."""
        os.close(self.report_fd)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the child and anything it started in its session
        except ProcessLookupError:
            pass
        status = self.process.wait()
        self.process.stdout.close()
        text = self.output.decode(errors="replace")
        messages, garbage = decode(bytes(self.report), self.key)
        if garbage:
            return messages, text, self.reason or f"reported garbage ({garbage})"
        reason = self.reason
        if reason is None and not any(m["kind"] == "done" for m in messages):
            reason = self._exit_reason(status, text)
        return messages, text, reason

    def _exit_reason(self, status: int, output: str) -> str:
        if any(text in output for text in OUT_OF_MEMORY):
            return f"memory limit {self.memory_mb} MiB exceeded"
        if status < 0:
            name = signal.Signals(-status).name
            why = {"SIGXCPU": f" (CPU time limit {cpu_limit(self.timeout)} s)",
                   "SIGXFSZ": f" (file size limit {FILE_LIMIT >> 20} MiB)"}.get(name, "")
            return f"killed by {name}{why} before reporting"
        return f"exited with status {status} before reporting"


def run_children(starters: dict[str, Callable[[], Child]], jobs: int) -> Iterator[tuple[str, Outcome, list[str]]]:
    """Start the children in `starters`' order, at most `jobs` at a time; as each ends, yield (its name, its outcome,
    the names of those still running). While the caller handles one, the others keep running (their clocks too)."""
    waiting = list(starters)
    running: dict[str, Child] = {}
    streams = selectors.DefaultSelector()
    try:
        while waiting or running:
            while waiting and len(running) < max(1, jobs):
                name = waiting.pop(0)
                running[name] = starters[name]()
                for fd in running[name].open:
                    streams.register(fd, selectors.EVENT_READ, name)
            for name in [n for n, child in running.items() if child.ended]:
                child = running.pop(name)
                for fd in list(streams.get_map()):
                    if streams.get_key(fd).data == name:
                        streams.unregister(fd)
                yield name, child.finish(), list(running)
                break  # the caller took its time: look at the others' clocks again
            else:
                timeout = max(0.0, min(child.deadline for child in running.values()) - time.monotonic())
                for key, _ in streams.select(timeout=timeout):
                    child = running[key.data]
                    child.read(key.fd)
                    if key.fd not in child.open:
                        streams.unregister(key.fd)
    finally:
        streams.close()
        for child in running.values():  # the caller stopped early (an exception): leave no child behind
            child.finish()

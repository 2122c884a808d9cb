"""``bench.procfs``: every process's stat fields, read right even when a command name holds ") (" and spaces."""

import os
import shutil
import subprocess
import time

from bench import procfs


def test_this_process_is_found_with_its_parent_and_group() -> None:
    fields = dict(procfs.stat_fields())[os.getpid()]
    assert (int(fields[1]), int(fields[2])) == (os.getppid(), os.getpgrp())


def test_a_command_name_with_parentheses_and_spaces_does_not_shift_the_fields(tmp_path) -> None:
    odd = tmp_path / "a) b (c"
    shutil.copy(shutil.which("sleep"), odd)
    child = subprocess.Popen([str(odd), "30"])
    try:
        fields = dict(procfs.stat_fields())[child.pid]
        assert fields[0] in "RSD" and int(fields[1]) == os.getpid()
    finally:
        child.kill()
        child.wait()


def test_the_machine_busy_seconds_count_this_process_burning_a_core() -> None:
    busy, steal = procfs.machine_cpu_s()
    began = time.process_time()
    while time.process_time() - began < 0.3:
        pass
    after, steal_after = procfs.machine_cpu_s()
    assert after - busy >= 0.25 and steal_after >= steal >= 0


def test_a_named_thread_that_burns_cpu_is_found_with_its_seconds() -> None:
    import ctypes
    import threading

    done = threading.Event()
    found: list[float] = []

    def burn() -> None:
        ctypes.CDLL(None).prctl(15, b"cpu-burner x)", 0, 0, 0)  # PR_SET_NAME, with a ")" in the name
        began = time.thread_time()
        while time.thread_time() - began < 0.3:
            pass
        found.extend(cpu for name, cpu in procfs.thread_cpu_s(os.getpid()) if name == "cpu-burner x)")
        done.set()

    threading.Thread(target=burn).start()
    assert done.wait(10)
    assert len(found) == 1 and found[0] >= 0.25

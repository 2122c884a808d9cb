"""The soak's JVM gauge: what a full GC left, read in the same attach session as the GC.

A busy query allocates between the GC and the reading; read with one ``jcmd`` per command (a JVM started for
each), the 40-minute EFO soak saw "heap after GC" samples of 64-179 MiB on a flat driver. The young regions in use
at the reading are that allocation, not what the GC left.
"""

import shutil

import pytest

from bench import common, soak_gauges

G1_AFTER_FULL_GC = """12504:
Command executed successfully
 garbage-first heap   total 219136K, used 166174K [0x00000000c0000000, 0x0000000100000000)
  region size 1024K, 98 young (100352K), 0 survivors (0K)
 Metaspace       used 131451K, committed 132544K, reserved 1179648K
  class space    used 16423K, committed 16960K, reserved 1048576K
CodeHeap 'non-profiled nmethods': size=120032Kb used=10240Kb max_used=10240Kb free=109792Kb
CodeHeap 'profiled nmethods': size=120028Kb used=20480Kb max_used=20480Kb free=99548Kb
"""

PARALLEL_AFTER_FULL_GC = """ PSYoungGen      total 76288K, used 3932K
 ParOldGen       total 175104K, used 65536K
 Metaspace       used 131451K, committed 132544K, reserved 1179648K
"""

# What JDK 17 printed for a Spark driver started with -XX:+UseSerialGC (the tests' JVMs).
SERIAL = """8799:
 def new generation   total 116224K, used 99228K [0x00000000c0000000, 0x00000000c7e10000, 0x00000000d5550000)
  eden space 103360K,  96% used [0x00000000c0000000, 0x00000000c60e7020, 0x00000000c64f0000)
  from space 12864K,   0% used [0x00000000c64f0000, 0x00000000c64f0000, 0x00000000c7180000)
 tenured generation   total 258048K, used 35774K [0x00000000d5550000, 0x00000000e5150000, 0x0000000100000000)
   the space 258048K,  13% used [0x00000000d5550000, 0x00000000d783f8c0, 0x00000000d783fa00, 0x00000000e5150000)
 Metaspace       used 76498K, committed 76992K, reserved 1179648K
"""

Z_HEAP = """ ZHeap           used 180M, capacity 256M, max capacity 4096M
 Metaspace       used 131451K, committed 132544K, reserved 1179648K
"""


def test_young_regions_allocated_after_the_gc_are_not_counted_as_what_it_left() -> None:
    gauge = soak_gauges.parse_jvm(G1_AFTER_FULL_GC)
    assert gauge.heap_after_gc_mb == pytest.approx((166174 - 100352) / 1024)
    assert gauge.young_after_gc_mb == pytest.approx(100352 / 1024)
    assert gauge.metaspace_mb == pytest.approx(131451 / 1024)
    assert gauge.code_cache_mb == pytest.approx(30.0)


@pytest.mark.parametrize(
    ("printed", "young_kb", "old_kb"), [(PARALLEL_AFTER_FULL_GC, 3932, 65536), (SERIAL, 99228, 35774)]
)
def test_a_generational_collector_left_what_its_old_generation_holds(printed: str, young_kb: int, old_kb: int) -> None:
    gauge = soak_gauges.parse_jvm(printed)
    assert gauge.young_after_gc_mb == pytest.approx(young_kb / 1024)
    assert gauge.heap_after_gc_mb == pytest.approx(old_kb / 1024)


def test_a_heap_printed_in_another_form_reads_as_nothing_never_a_guess() -> None:
    gauge = soak_gauges.parse_jvm(Z_HEAP)
    assert (gauge.heap_after_gc_mb, gauge.young_after_gc_mb) == (0.0, 0.0)
    assert gauge.metaspace_mb == pytest.approx(131451 / 1024)


@pytest.mark.skipif(shutil.which("jcmd") is None, reason="jcmd comes with the JDK Spark runs on")
def test_one_session_reads_the_live_driver_jvm(spark) -> None:
    pid = common.jvm_pid(spark)
    gauge = soak_gauges.jvm(pid)
    # A fresh JVM on the class-data archive (tests/spark_classes.py) holds only ~6 MiB of metaspace.
    assert gauge.heap_after_gc_mb > 10 and gauge.metaspace_mb > 1 and gauge.code_cache_mb > 0
    assert "java.lang" in soak_gauges.class_histogram(pid) or "[B" in soak_gauges.class_histogram(pid)

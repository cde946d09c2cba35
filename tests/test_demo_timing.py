"""`make demo`'s stage timing: the wrapper records wall and CPU time per stage and prints one table;
the Makefile runs the quick demo by default and the full one with FULL=1; hardware facts name the
CPU's vector instruction sets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.run.runner import cpu_simd_flags, ctranslate2_facts, hardware_facts

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "scripts" / "demo_stage.sh"


def test_stage_times_wall_and_cpu_and_prints_a_table(tmp_path: Path) -> None:
    table = tmp_path / "times.tsv"
    busy = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"]
    assert subprocess.run([str(STAGE), str(table), "venv", "sleep", "0.5"]).returncode == 0
    assert subprocess.run([str(STAGE), str(table), "audit", *busy]).returncode == 0
    assert subprocess.run([str(STAGE), str(table), "broken", "false"]).returncode == 1  # the stage's exit status is kept
    rows = [line.split("\t") for line in table.read_text().splitlines()]
    assert [r[0] for r in rows] == ["venv", "audit", "broken"] and [r[3] for r in rows] == ["0", "0", "1"]
    (_, wall_sleep, cpu_sleep, _), (_, wall_busy, cpu_busy, _) = rows[:2]
    assert float(wall_sleep) >= 0.5 and float(cpu_sleep) < 0.3, "waiting is wall time, not CPU time"
    assert float(cpu_busy) >= 0.5, "the child's CPU time is counted"
    out = subprocess.run([str(STAGE), "--table", str(table)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].split()[:2] == ["stage", "wall"] and [line.split()[0] for line in out[1:]] == ["venv", "audit", "broken", "total"]


def test_make_demo_runs_the_quick_demo_unless_full() -> None:
    quick = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    full = subprocess.run(["make", "-n", "demo", "FULL=1"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "run demo --out runs/demo" in quick and "--table runs/demo-times.tsv" in quick
    assert "run demo-full --out runs/demo-full" in full
    for stage in ('"system packages"', '"venv"', '"corpus"', '"audit"'):
        assert stage in quick


def test_cpu_flags_come_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse4_1 avx avx2 fma avx512f avx512_vnni pni\n")
    assert cpu_simd_flags(str(info)) == ["sse4_1", "avx", "avx2", "fma", "avx512f", "avx512_vnni"]
    assert cpu_simd_flags(str(tmp_path / "missing")) == []
    facts = hardware_facts()
    assert isinstance(facts["cpu_flags"], list)
    ct2 = ctranslate2_facts()["ctranslate2"]
    assert "int8" in ct2["cpu_compute_types"] and ct2["version"]

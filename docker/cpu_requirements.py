"""Print the worker lock's pins for the CPU variant of the worker image: without torch (installed
from PyTorch's CPU index first), the CUDA wheels and onnxruntime-gpu.

    python cpu_requirements.py requirements-worker.txt > requirements-cpu.txt
"""

import re
import sys

SKIP = ("nvidia-", "torch==", "onnxruntime-gpu==")
PIN = re.compile(r"^([A-Za-z0-9._-]+(?:\[[^\]]*\])?==[^\s\\;]+)", re.MULTILINE)

with open(sys.argv[1], encoding="utf-8") as fh:
    lock = fh.read()
for match in PIN.finditer(lock):
    if not match.group(1).startswith(SKIP):
        print(match.group(1))

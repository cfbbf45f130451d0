# nbgrader configuration for KernelLab. Run nbgrader from this folder (autograder/):
# source = ../solutions, release = ../notebooks; see kernellab/grading/nbgrader_plugin.py.
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # import kernellab from this checkout even when it is not installed

from kernellab.grading.nbgrader_plugin import configure  # noqa: E402

c = get_config()  # noqa: F821 - provided by traitlets
configure(c, os.path.dirname(here))

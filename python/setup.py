# The native core is built by cffi at install time; everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["src/mstar_transport/_build_native.py:ffibuilder"])

#!/bin/sh
# Makes the virtual environment the build's Python tests use: Debian's python3 with its numpy, pytest, hypothesis
# and cffi (no package index is needed), and this package installed from a copy of python/ (the source tree stays
# clean). Without those packages it says what to install and makes none: the Python tests then skip, saying why.
set -eu
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
python=/usr/bin/python3
packages="gcc python3-dev python3-numpy python3-cffi python3-setuptools python3-wheel python3-venv python3-pytest python3-hypothesis"
missing=""
"$python" -c 'import numpy, cffi, pytest, hypothesis, setuptools, wheel' 2>/dev/null || missing="numpy, cffi, pytest, hypothesis, setuptools or wheel"
command -v cc > /dev/null 2>&1 || missing="${missing:+$missing; }a C compiler (the native core is built at install)"
[ -f "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    || missing="${missing:+$missing; }Python's headers"
if [ -n "$missing" ]; then
    echo "python tests skipped: $python lacks $missing (apt-get install $packages)"
    rm -rf "$venv"
    exit 0
fi
if [ -x "$venv/bin/python" ] && [ "$venv/.built-from" -nt "$here/src/mstar_transport" ] \
   && [ -z "$(find "$here" -newer "$venv/.built-from" -name '*.py' -print -quit)" ]; then
    exit 0 # up to date
fi
rm -rf "$venv" "$venv-src"
"$python" -m venv --system-site-packages "$venv"
mkdir -p "$venv-src"
cp -r "$here/pyproject.toml" "$here/setup.py" "$here/src" "$venv-src/"
"$venv/bin/pip" install --quiet --no-index --no-build-isolation "$venv-src"
touch "$venv/.built-from"
echo "python package installed in $venv"

#!/usr/bin/env bash
# The README's Python installation on this machine: a venv over Debian's Python and packages, pip install
# of ./python without build isolation (nothing fetched; the extension comes from the CMake build named
# below), then the module's tests against the installed package, from outside the repository.
#   install_test.sh PYTHON BUILD_DIR STRATA_BIN
set -euo pipefail
python=$1 build=$2 strata_bin=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv --system-site-packages "$work/venv"
STRATA_CMAKE_BUILD_DIR="$build" PIP_NO_INDEX=1 "$work/venv/bin/pip" install --quiet --no-build-isolation \
  --no-deps "$here/.." >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }

cd "$work"  # Not the repository: the import must find the installed package.
"$work/venv/bin/python" - <<'PY'
import strata, os
assert strata.__file__.startswith(os.getcwd()), strata.__file__
assert os.path.isdir(os.path.join(os.path.dirname(strata.__file__), "prompts")), "the prompt templates are installed"
e = strata.Engine.open("data")
e.write("strata://resources/readme", "Installed from the README's steps.")
assert e.find("README steps")[0].uri == "strata://resources/readme"
assert "Hybrid" in strata.Engine.find.__doc__, "docstrings are installed"
PY
cp -r "$here" "$work/tests"
STRATA_BIN="$strata_bin" PYTHONDONTWRITEBYTECODE=1 "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/tests"

"""Builds strata._strata with the repository's CMake build (the package's only compiled part).

pip runs this from `pip install --no-build-isolation ./python`. The extension is the CMake target
`strata_python` (python/CMakeLists.txt), built in Release in python/build/cmake, or in the CMake build
directory named by STRATA_CMAKE_BUILD_DIR (an existing build of the repository, e.g. `build`, which then
only builds what it lacks; a relative path is taken from the repository's root). The shipped prompt templates are installed beside the module.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (ROOT / "CMakeLists.txt").is_file():
            sys.exit("strata: build from the repository (pip install ./python), which holds the C++ sources")
        given = os.environ.get("STRATA_CMAKE_BUILD_DIR")
        build_dir = (ROOT / given).resolve() if given else HERE / "build" / "cmake"
        if not (build_dir / "CMakeCache.txt").is_file():
            build_dir.mkdir(parents=True, exist_ok=True)
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            self._run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *generator,
                       "-DCMAKE_BUILD_TYPE=Release", "-DSTRATA_BUILD_TESTS=OFF", "-DSTRATA_BUILD_BENCH=OFF",
                       f"-DPython_EXECUTABLE={sys.executable}", "-DSTRATA_BUILD_PYTHON=ON"])
        else:
            self._run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DSTRATA_BUILD_PYTHON=ON"])
        self._run(["cmake", "--build", str(build_dir), "--target", "strata_python"])
        built = build_dir / "python" / "strata"
        modules = sorted(built.glob("_strata*.so"))
        if not modules:
            sys.exit(f"strata: the build left no _strata module in {built}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(modules[-1], target)
        prompts = target.parent / "prompts"
        shutil.rmtree(prompts, ignore_errors=True)
        shutil.copytree(ROOT / "prompts", prompts)

    @staticmethod
    def _run(command: list) -> None:
        print("strata:", " ".join(command), flush=True)
        subprocess.run(command, check=True)


setup(ext_modules=[CMakeExtension("strata._strata")], cmdclass={"build_ext": CMakeBuild})

"""Builds the C++ gRPC transport of `tritonctl serve` (tritonctl/serve/grpc/_native.cpp) when
gRPC's C++ library is installed (`pkg-config grpc++`; Debian: libgrpc++-dev). Without it, or if
it does not compile, the package installs without it and the server speaks gRPC through grpc.aio.
Everything else about the package is in pyproject.toml."""

import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = "tritonctl.serve.grpc._native"


def grpc_flags() -> list[str] | None:
    try:
        found = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++"], capture_output=True, text=True,
                               check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return shlex.split(found.stdout)


def extensions() -> list[Extension]:
    flags = grpc_flags()
    if flags is None:
        print(f"tritonctl: gRPC's C++ library not found (pkg-config grpc++): {NATIVE} is not built, "
              "gRPC is served through grpc.aio")
        return []
    import pybind11

    linking = [f for f in flags if f.startswith(("-l", "-L", "-Wl"))]
    compiling = [f for f in flags if f not in linking]
    return [Extension(NATIVE, ["tritonctl/serve/grpc/_native.cpp"], include_dirs=[pybind11.get_include()],
                      language="c++", extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", *compiling],
                      extra_link_args=linking)]


class OptionalBuildExt(build_ext):
    """A transport that does not compile leaves the package without it, not uninstallable."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # distutils' CompileError / LinkError, or a missing compiler
            print(f"tritonctl: {ext.name} was not built ({exc}); gRPC is served through grpc.aio")


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

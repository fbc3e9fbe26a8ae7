"""Builds the C++ transports of `tritonctl serve` when their libraries are installed (found by
pkg-config): gRPC over gRPC's C++ library (`grpc++`; Debian: libgrpc++-dev) and HTTP over
libevent (`libevent_pthreads`; Debian: libevent-dev). Without a library, or if a transport does
not compile, the package installs without it and the server falls back to its Python transport
(grpc.aio, uvicorn). Everything else about the package is in pyproject.toml."""

import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# module, source, pkg-config package, the fallback when the transport is not built
TRANSPORTS = [
    ("tritonctl.serve.grpc._native", "tritonctl/serve/grpc/_native.cpp", "grpc++", "gRPC is served through grpc.aio"),
    ("tritonctl.serve.http._native", "tritonctl/serve/http/_native.cpp", "libevent_pthreads",
     "HTTP is served through uvicorn"),
]
FALLBACKS = {module: fallback for module, _, _, fallback in TRANSPORTS}


def pkg_config(package: str) -> list[str] | None:
    try:
        found = subprocess.run(["pkg-config", "--cflags", "--libs", package], capture_output=True, text=True,
                               check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return shlex.split(found.stdout)


def extensions() -> list[Extension]:
    built = []
    for module, source, package, fallback in TRANSPORTS:
        flags = pkg_config(package)
        if flags is None:
            print(f"tritonctl: {package} not found by pkg-config: {module} is not built, {fallback}")
            continue
        import pybind11

        linking = [f for f in flags if f.startswith(("-l", "-L", "-Wl"))]
        compiling = [f for f in flags if f not in linking]
        built.append(Extension(module, [source], include_dirs=[pybind11.get_include(), "tritonctl/serve"],
                               depends=["tritonctl/serve/event_queue.h", "tritonctl/serve/http/over_limit.h"],
                               language="c++",
                               extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", *compiling],
                               extra_link_args=linking))
    return built


class OptionalBuildExt(build_ext):
    """A transport that does not compile leaves the package without it, not uninstallable."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # distutils' CompileError / LinkError, or a missing compiler
            print(f"tritonctl: {ext.name} was not built ({exc}); {FALLBACKS[ext.name]}")


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

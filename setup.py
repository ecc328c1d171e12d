"""The one compiled part of the package: the index build's hot loops (codesearch/index/kernels.c).

Everything else about the distribution is declared in pyproject.toml; setuptools merges the two.
`make install` builds the extension in place (``pip install -e .``) with the machine's C
compiler (Debian's gcc, which `make` installs when it is missing); docs/architecture.md says why
C and not numba.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "codesearch.index._kernels",
            sources=["codesearch/index/kernels.c"],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        )
    ]
)

"""The build's one addition to pyproject.toml: with ``DDZ_COMPILE=1`` the rules' hot modules
and the workers' search (``[tool.ddz] compiled``) are compiled to C extensions by mypyc, from
the same sources, for a faster engine and more play-outs per decision (docs/bot.md, "The
engine"). That build needs mypy and a C compiler:
``bin/compiled`` and deploy/Dockerfile run ``setup.py build_ext --inplace`` on a copy of the
sources. Without it, the package is pure Python, as the development install must be (a
compiled module beside its source would shadow every edit of it)."""

import os
import tomllib

from setuptools import setup


def compiled_extensions() -> list:
    if os.environ.get("DDZ_COMPILE") != "1":
        return []
    from mypyc.build import mypycify

    with open("pyproject.toml", "rb") as f:
        modules = tomllib.load(f)["tool"]["ddz"]["compiled"]
    # The modules' shared library inside the package (service/rules/compiled__mypyc.*.so),
    # not beside it at the top level, where only a path that names the tree would find it.
    return mypycify(modules, opt_level="3", group_name="service.rules.compiled")


setup(ext_modules=compiled_extensions())

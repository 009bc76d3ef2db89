"""Plug-in modules found on disk: a registry imports every module of its package's folder that declares
what it registers, so that a new module needs no list to edit (judges/suite.py's judge suites; the run
extensions of pipelines/extensions/ are found the same way)."""
from __future__ import annotations

import pkgutil
import re
from functools import cache
from pathlib import Path


@cache
def package_modules(package: str, folder: Path, declares: re.Pattern[str] | None = None,
                    skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The dotted names of the modules directly in `folder` (the package `package`), in name order:
    subpackages and the names in `skip` left out, and, with `declares`, only those whose source it
    matches."""
    return tuple(f"{package}.{module.name}" for module in pkgutil.iter_modules([str(folder)])
                 if not module.ispkg and module.name not in skip
                 and (declares is None or declares.search((folder / f"{module.name}.py").read_text())))

"""Plug-in modules found on disk (infra/plugins.py): the modules of a folder, in name order, without its
subpackages, the names skipped, and only those whose source declares what a pattern looks for."""
import re

from infra.plugins import package_modules


def test_the_modules_of_a_folder_that_declare_what_the_pattern_looks_for(tmp_path):
    (tmp_path / "b.py").write_text("class B(Base):\n    pass\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "registry.py").write_text("class Base:\n    pass\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("class C(Base):\n    pass\n")
    assert package_modules("pkg", tmp_path) == ("pkg.a", "pkg.b", "pkg.registry")
    assert package_modules("pkg", tmp_path, skip=("registry",)) == ("pkg.a", "pkg.b")
    assert package_modules("pkg", tmp_path, re.compile(r"^class \w+\(Base\)", re.MULTILINE)) == ("pkg.b",)

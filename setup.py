"""Packages, and the top-level asset folders the wheel carries inside them.

The repository keeps `lua/`, `templates/` and `static/` at its top (docs: the layout is fixed); a wheel
has no top level of its own, so they are mapped into the packages that use them: `ffcore/lua/` (found by
ffcore.library.find_lua_dir) and `dashboard/templates/`, `dashboard/static/` (found by Django's app
template loader and app static finder). An editable install keeps reading them from the checkout.
Everything else about the project is in pyproject.toml.
"""

from setuptools import find_packages, setup

#: package name inside the wheel -> folder in the repository
ASSET_PACKAGES = {"ffcore.lua": "lua", "dashboard.templates": "templates", "dashboard.static": "static"}

setup(
    packages=find_packages(include=["ffcore", "ffcore.*", "dashboard", "dashboard.*"]) + list(ASSET_PACKAGES),
    package_dir=ASSET_PACKAGES,
    package_data={name: ["**/*"] for name in ASSET_PACKAGES},
)

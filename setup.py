"""Packaging for sentcl, driven by settings.ini (the nbdev 2 layout), with setuptools alone."""
import shlex
from configparser import ConfigParser

import setuptools

config = ConfigParser(delimiters=["="])
config.read("settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable",
            "6 - Mature", "7 - Inactive"]
py_versions = "3.10 3.11 3.12 3.13".split()

lic = licenses[cfg["license"]]
min_python = cfg["min_python"]
requirements = shlex.split(cfg.get("requirements", ""))
dev_requirements = shlex.split(cfg.get("dev_requirements", ""))

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    url=cfg["git_url"],
    license=lic[0],
    classifiers=[
        "Development Status :: " + statuses[int(cfg["status"])],
        "Intended Audience :: " + cfg["audience"].title(),
        "License :: " + lic[1],
        "Natural Language :: " + cfg["language"].title(),
    ] + ["Programming Language :: Python :: " + v for v in py_versions[py_versions.index(min_python):]],
    packages=setuptools.find_packages(include=["sentcl", "sentcl.*"]),
    include_package_data=True,
    package_data={"sentcl": ["samples/*", "samples/**/*", "published/*"]},
    install_requires=requirements,
    extras_require={"dev": dev_requirements},
    python_requires=">=" + min_python,
    zip_safe=False,
    entry_points={"console_scripts": cfg.get("console_scripts", "").split(),
                  "nbdev": [f'{cfg["lib_name"]}={cfg["lib_name"]}._modidx:d']},
    keywords=cfg["keywords"],
)

#!/usr/bin/env python3
"""Builds ``adventuretime-<version>-py3-none-any.whl`` with the standard library only (no pip,
setuptools or network), per the wheel spec (PEP 427, PEP 376 RECORD, core metadata 2.1).

    python3 build_wheel.py OUT_DIR [--version V]

The version defaults to the repository's package.json (the package is versioned with the CLI);
it is written into the wheel's ``adventuretime/__init__.py`` and METADATA. The output is the same
bytes for the same sources and version (fixed timestamps, sorted entries). Prints the wheel's path.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")
NAME = "adventuretime"
SUMMARY = "The AdventureTime run contract for Python workloads: RunEnv, checkpoints, preemption, metrics"
# Zip entries carry this date (the earliest zip allows), so a rebuild is byte-identical.
EPOCH = (1980, 1, 1, 0, 0, 0)


def repo_version():
    with open(os.path.join(HERE, "..", "..", "package.json"), encoding="utf-8") as f:
        return json.load(f)["version"]


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.9\n"
        "Provides-Extra: jax\n"
        'Requires-Dist: jax; extra == "jax"\n'
        'Requires-Dist: orbax-checkpoint; extra == "jax"\n'
        "Provides-Extra: torch\n"
        'Requires-Dist: torch; extra == "torch"\n'
    )


_WHEEL = "Wheel-Version: 1.0\nGenerator: adventuretime build_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

_VERSION_LINE = re.compile(r'^__version__ = "[^"]*"$', re.M)


def _sources():
    """(archive name, bytes) of every .py file of the package, sorted."""
    out = []
    root = os.path.join(SRC, NAME)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                path = os.path.join(dirpath, fn)
                with open(path, "rb") as f:
                    out.append((os.path.relpath(path, SRC).replace(os.sep, "/"), f.read()))
    return sorted(out)


def build(out_dir, version=None):
    """Writes the wheel into ``out_dir``; returns its path."""
    version = version or repo_version()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)", version):
        raise ValueError(f"version {version!r} is not a version a wheel can carry")
    dist_info = f"{NAME}-{version}.dist-info"
    files = []
    for name, data in _sources():
        if name == f"{NAME}/__init__.py":
            text, n = _VERSION_LINE.subn(f'__version__ = "{version}"', data.decode("utf-8"))
            if n != 1:
                raise ValueError(f"{name} must hold exactly one line __version__ = \"...\" (found {n})")
            data = text.encode("utf-8")
        files.append((name, data))
    files.append((f"{dist_info}/METADATA", _metadata(version).encode()))
    files.append((f"{dist_info}/WHEEL", _WHEEL.encode()))
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files) + f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{NAME}-{version}-py3-none-any.whl")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description="Build the adventuretime wheel (standard library only)")
    p.add_argument("out_dir")
    p.add_argument("--version", help="default: package.json's version")
    a = p.parse_args(argv)
    print(build(a.out_dir, a.version))


if __name__ == "__main__":
    sys.exit(main())

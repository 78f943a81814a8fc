"""The package as shipped: one version with the CLI, a stdlib-only import, a valid wheel."""

import base64
import hashlib
import json
import os
import re
import sys
import unittest
import zipfile

import support  # noqa: F401
import adventuretime

from support import PKG, REPO, SRC, TempDir, child_env, finish, spawn

sys.path.insert(0, PKG)
import build_wheel  # noqa: E402


def package_json_version():
    with open(os.path.join(REPO, "package.json"), encoding="utf-8") as f:
        return json.load(f)["version"]


class VersionTest(unittest.TestCase):
    def test_pyproject_and_the_package_carry_package_jsons_version(self):
        with open(os.path.join(PKG, "pyproject.toml"), encoding="utf-8") as f:
            pyproject = re.search(r'^version = "([^"]+)"$', f.read(), re.M).group(1)
        want = package_json_version()
        self.assertEqual(pyproject, want, "runtime/python/pyproject.toml's version must be package.json's")
        self.assertEqual(adventuretime.__version__, want, "adventuretime/__init__.py's __version__ must be package.json's")


class ImportTest(unittest.TestCase):
    def test_importing_the_package_loads_no_framework(self):
        code = (
            "import sys, adventuretime\n"
            "heavy = [m for m in ('jax', 'torch', 'orbax', 'numpy', 'wandb') if m in sys.modules]\n"
            "print('heavy', heavy)\n"
        )
        code_, out = finish(spawn(code, child_env()))
        self.assertEqual(code_, 0, out)
        self.assertIn("heavy []", out)


class WheelTest(unittest.TestCase):
    def test_the_wheel_follows_the_spec_and_imports(self):
        with TempDir() as d:
            path = build_wheel.build(d, "9.8.7")
            self.assertEqual(os.path.basename(path), "adventuretime-9.8.7-py3-none-any.whl")
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                info = "adventuretime-9.8.7.dist-info/"
                for n in ("METADATA", "WHEEL", "RECORD"):
                    self.assertIn(info + n, names)
                meta = z.read(info + "METADATA").decode()
                self.assertIn("Name: adventuretime\n", meta)
                self.assertIn("Version: 9.8.7\n", meta)
                self.assertIn("Tag: py3-none-any", z.read(info + "WHEEL").decode())
                rows = [r.split(",") for r in z.read(info + "RECORD").decode().splitlines()]
                self.assertEqual(sorted(r[0] for r in rows), sorted(names))
                for name, digest, size in rows:
                    if name == info + "RECORD":
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = z.read(name)
                    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (want, len(data)), name)
                src = sorted(
                    os.path.relpath(os.path.join(dp, f), SRC)
                    for dp, _, fs in os.walk(os.path.join(SRC, "adventuretime"))
                    for f in fs
                    if f.endswith(".py")
                )
                self.assertEqual(sorted(n for n in names if n.endswith(".py")), src)
            with open(path, "rb") as f:
                first = f.read()
            with open(build_wheel.build(d, "9.8.7"), "rb") as f:
                self.assertEqual(f.read(), first, "a rebuild of the same sources is byte-identical")
            # A pure-Python wheel imports straight from the zip: its version is the one written.
            env = child_env()
            env["PYTHONPATH"] = path
            code, out = finish(spawn("import adventuretime as a; print(a.__version__, a.__file__)", env, cwd=d))
            self.assertEqual(code, 0, out)
            self.assertIn("9.8.7 " + path, out)

    def test_the_default_version_is_package_jsons(self):
        with TempDir() as d:
            self.assertTrue(build_wheel.build(d).endswith(f"adventuretime-{package_json_version()}-py3-none-any.whl"))

    def test_a_bad_version_is_refused(self):
        with TempDir() as d:
            with self.assertRaisesRegex(ValueError, "not a version"):
                build_wheel.build(d, "1.0 beta")


if __name__ == "__main__":
    unittest.main()

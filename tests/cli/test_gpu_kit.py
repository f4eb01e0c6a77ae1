"""`make gpu-kit` (scripts/gpu_kit.py) without a network: the resolution of dlperf's requirements against a
recorded freeze (the lent GPU image's list) with the wheels' metadata as PyPI's wheels state it, and the download
loop, the manifest and the size limit with a stand-in for `pip download` that writes made-up wheels."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_kit.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_kit  # noqa: E402  (scripts/ is not a package: found through the line above)
from gpu_evidence import is_protected, wheel_project  # noqa: E402

ENV312 = gpu_kit.target_env("3.12")
IMAGE = gpu_kit.parse_freeze(gpu_kit.IMAGE_LIST.read_text())
#: Requires-Dist of the cp312 wheels pip chose on 2026-11-27 (optional extras' lines cut to a few).
META = {
    "pydantic": gpu_kit.Dist("pydantic", "2.14.4", (
        "annotated-types>=0.6.0", "pydantic-core==2.50.5", "typing-extensions>=4.16.0", "typing-inspection>=0.4.4",
        "email-validator>=2.0.0; extra == 'email'", "tzdata; (platform_system == 'Windows') and extra == 'timezone'")),
    "pydantic-core": gpu_kit.Dist("pydantic_core", "2.50.5", ("typing-extensions>=4.16.0",)),
    "annotated-types": gpu_kit.Dist("annotated-types", "0.8.0"),
    "typing-inspection": gpu_kit.Dist("typing-inspection", "0.4.5", ("typing-extensions>=4.15.0",)),
    "sqlalchemy": gpu_kit.Dist("SQLAlchemy", "2.1.9", ("typing-extensions>=4.6.0", 'greenlet>=1; extra == "asyncio"',
                                                      'psycopg!=3.1.15,>=3.0.7; extra == "postgresql"')),
    "ruptures": gpu_kit.Dist("ruptures", "1.1.10", ("numpy", "scipy", 'matplotlib; extra == "display"')),
    "nvtx": gpu_kit.Dist("nvtx", "0.2.17", ('pytest; extra == "test"',)),
    "mlcommons-loadgen": gpu_kit.Dist("mlcommons_loadgen", "6.0.17"),
    # the fleet extra (Dask): the first H200 run skipped the fleet's GPU test for want of `distributed`
    "distributed": gpu_kit.Dist("distributed", "2026.8.0", (
        "click>=8.0", "cloudpickle>=3.0.0", "dask<2026.8.1,>=2026.8.0", "jinja2>=2.10.3", "locket>=1.0.0",
        "msgpack>=1.0.2", "packaging>=20.0", "psutil>=5.8.0", "pyyaml>=5.4.1", "sortedcontainers>=2.0.5",
        "tblib!=3.2.0,!=3.2.1,>=1.6.0", "toolz>=0.12.0", "tornado>=6.2.0", "zict>=3.0.0")),
    "dask": gpu_kit.Dist("dask", "2026.8.0", (
        "click>=8.1", "cloudpickle>=3.0.0", "fsspec>=2021.09.0", "packaging>=20.0", "partd>=1.4.0", "pyyaml>=5.4.1",
        "toolz>=0.12.0", 'importlib_metadata>=4.13.0; python_version < "3.12"')),
    "partd": gpu_kit.Dist("partd", "1.4.2", ("locket", "toolz")),
    "locket": gpu_kit.Dist("locket", "1.0.0"),
    "tblib": gpu_kit.Dist("tblib", "3.2.2"),
    "tornado": gpu_kit.Dist("tornado", "6.6.1"),
    "zict": gpu_kit.Dist("zict", "3.0.0"),
}
#: SQLAlchemy 2.0's greenlet line, which 2.1 moved into its asyncio extra.
SA20 = gpu_kit.Dist("SQLAlchemy", "2.0.36", (
    "typing-extensions>=4.6.0", 'greenlet!=0.4.17; python_version < "3.14" and (platform_machine == "aarch64" or '
    '(platform_machine == "ppc64le" or (platform_machine == "x86_64" or (platform_machine == "amd64" or '
    '(platform_machine == "AMD64" or (platform_machine == "win32" or platform_machine == "WIN32"))))))'))


def _requirements() -> list[str]:
    return gpu_kit.project_requirements((ROOT / "pyproject.toml").read_text())


def test_against_the_image_list_the_kit_is_what_the_image_lacks_and_their_own_needs():
    res = gpu_kit.resolve(_requirements(), IMAGE, ENV312, META)
    assert res.needs == {}
    assert [f.name for f in res.fetch] == ["annotated-types", "dask", "distributed", "locket", "mlcommons-loadgen",
                                           "nvtx", "partd", "pydantic", "pydantic-core", "ruptures", "sqlalchemy",
                                           "tblib", "tornado", "typing-inspection", "zict"]
    by = {f.name: f for f in res.fetch}
    assert by["pydantic-core"].why == ["pydantic needs pydantic-core==2.50.5 (absent on the target)"]
    assert by["pydantic"].why == ["dlperf needs pydantic>=2.5 (absent on the target)"]
    assert by["pydantic-core"].version == "2.50.5" and by["sqlalchemy"].specifier == ">=2.0"
    assert "greenlet" not in by  # SQLAlchemy 2.1 asks for it only in its asyncio extra
    # the image's frameworks are never fetched, and the CUDA 13 CuPy of the `gpu` extra is the image's own
    assert not any(is_protected(f.name) for f in res.fetch)
    assert any(p.startswith("cupy-cuda13x 14.2.0: dlperf needs cupy-cuda13x>=14") for p in res.present)
    assert any(p.startswith("torch 2.11.0: dlperf needs torch>=2.1") for p in res.present)
    assert any(p.startswith("typing-extensions (version not given") for p in res.present)
    assert [s.split(":")[0] for s in res.skipped] == ["mypy", "nncf", "openvino", "playwright", "ruff"]
    assert "tensorflow-cpu" not in " ".join(res.present + [f.name for f in res.fetch])


def test_the_first_round_asks_for_the_missing_roots_then_their_needs():
    first = gpu_kit.resolve(_requirements(), IMAGE, ENV312, {})
    assert first.needs == {"distributed": ">=2024.1", "mlcommons-loadgen": ">=4.1", "nvtx": ">=0.2",
                           "pydantic": ">=2.5", "ruptures": ">=1.1.9", "sqlalchemy": ">=2.0"}
    second = gpu_kit.resolve(_requirements(), IMAGE, ENV312, {k: META[k] for k in first.needs})
    assert second.needs == {"annotated-types": ">=0.6.0", "dask": "<2026.8.1,>=2026.8.0", "locket": ">=1.0.0",
                            "pydantic-core": "==2.50.5", "tblib": "!=3.2.0,!=3.2.1,>=1.6.0", "tornado": ">=6.2.0",
                            "typing-inspection": ">=0.4.4", "zict": ">=3.0.0"}


def test_sqlalchemy_2_0_brings_greenlet_on_x86_64_only():
    meta = {**META, "sqlalchemy": SA20, "greenlet": gpu_kit.Dist("greenlet", "3.1.1")}
    on_x86 = {f.name for f in gpu_kit.resolve(["SQLAlchemy>=2.0,<2.1"], IMAGE, ENV312, meta).fetch}
    assert on_x86 == {"sqlalchemy", "greenlet"}
    on_riscv = gpu_kit.resolve(["SQLAlchemy>=2.0,<2.1"], IMAGE, gpu_kit.target_env("3.12", "riscv64"), meta)
    assert {f.name for f in on_riscv.fetch} == {"sqlalchemy"}
    # a wheel the requirements exclude (2.1.9 against <2.1) is asked for again
    assert gpu_kit.resolve(["SQLAlchemy>=2.0,<2.1"], IMAGE, ENV312, META).needs == {"sqlalchemy": "<2.1,>=2.0"}


def test_a_given_freeze_decides_versions_and_frameworks_are_kept_as_they_are():
    freeze = gpu_kit.parse_freeze("torch==2.0.1+cu118\npydantic==1.10.13\ntyping_extensions==4.5.0\nnumpy==2.1.0\n"
                                  "annotated-types==0.7.0\n")
    res = gpu_kit.resolve(["torch>=2.1", "pydantic>=2.5", "numpy>=1.26"], freeze, ENV312, META)
    by = {f.name: f for f in res.fetch}
    assert sorted(by) == ["pydantic", "pydantic-core", "typing-extensions", "typing-inspection"]
    assert by["pydantic"].why == ["dlperf needs pydantic>=2.5 (the target has 1.10.13)"]
    assert res.needs == {"typing-extensions": ">=4.15.0,>=4.16.0"}  # no metadata given for it: fetch it next
    assert res.kept == ["torch: dlperf needs torch>=2.1, the target has 2.0.1+cu118; never carried (the node's own "
                        "build is what is measured)"]
    assert "annotated-types 0.7.0: pydantic needs annotated-types>=0.6.0" in res.present


def test_extras_of_a_requirement_bring_their_lines_and_markers_are_the_targets():
    meta = {"psycopg": gpu_kit.Dist("psycopg", "3.2.3", ('psycopg-binary==3.2.3; implementation_name != "pypy" and '
                                                         'extra == "binary"', 'tzdata; sys_platform == "win32"')),
            "psycopg-binary": gpu_kit.Dist("psycopg-binary", "3.2.3")}
    res = gpu_kit.resolve(["psycopg[binary]>=3.1", "tensorflow-cpu>=2.15; platform_machine == 'aarch64'"],
                          {}, ENV312, meta)
    assert [f.name for f in res.fetch] == ["psycopg", "psycopg-binary"] and res.skipped == []
    plain = gpu_kit.resolve(["psycopg>=3.1"], {}, ENV312, meta)
    assert [f.name for f in plain.fetch] == ["psycopg"]


def test_freeze_lines_pip_writes():
    got = gpu_kit.parse_freeze("# comment\n-i https://example.invalid\nFoo_Bar==1.0\nbaz @ file:///tmp/baz.whl\n"
                               "-e git+https://example.invalid/x.git@abc#egg=qux\nbare\n\n")
    assert got == {"foo-bar": "1.0", "baz": None, "qux": None, "bare": None}
    with pytest.raises(ValueError, match="not a line of pip freeze"):
        gpu_kit.parse_freeze("numpy >= 1 <\n")


def test_targets_and_tags():
    assert gpu_kit.platform_tags("x86_64", "2.28")[:2] == ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64"]
    assert "manylinux_2_17_x86_64" in gpu_kit.platform_tags("x86_64", "2.28")
    assert "manylinux2014_x86_64" in gpu_kit.platform_tags("x86_64", "2.28")
    with pytest.raises(ValueError, match="--glibc"):
        gpu_kit.platform_tags("x86_64", "2.5")
    with pytest.raises(ValueError, match="--python-version"):
        gpu_kit.target_env("3")
    with pytest.raises(ValueError, match="no extra cuda"):
        gpu_kit.project_requirements((ROOT / "pyproject.toml").read_text(), ("cuda",))
    assert "cupy-cuda12x>=13" in gpu_kit.project_requirements((ROOT / "pyproject.toml").read_text(), ("gpu-cuda12",))


def test_protected_names_and_wheel_names():
    for name in ("torch", "JAX", "jax_cuda13_plugin", "cupy-cuda13x", "nvidia-cublas", "nvidia-nccl-cu13", "triton"):
        assert is_protected(name), name
    for name in ("nvidia-ml-py", "nvtx", "pydantic", "cuda"):
        assert not is_protected(name), name
    assert wheel_project("pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.whl") == "pydantic-core"


def _fake_wheel(path: Path, dist: gpu_kit.Dist, size_bytes: int = 1000) -> Path:
    meta = f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in dist.requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist.name}-{dist.version}.dist-info/METADATA", meta)
        zf.writestr("pad.bin", b"\0" * size_bytes)
    return path


def test_build_kit_downloads_until_complete_and_writes_the_manifest(tmp_path, monkeypatch):
    asked = []

    def fake_download(name, spec, dest, python_version, tags):
        asked.append((name, spec, python_version, tags[0]))
        d = META[name]
        dest.mkdir(parents=True, exist_ok=True)
        return _fake_wheel(dest / f"{d.name}-{d.version}-py3-none-any.whl", d)

    monkeypatch.setattr(gpu_kit, "download", fake_download)
    out = tmp_path / "kit"
    out.mkdir()
    _fake_wheel(out / "stale-1.0-py3-none-any.whl", gpu_kit.Dist("stale", "1.0"))  # an earlier kit's leftover
    m = gpu_kit.build_kit(out, "3.12", gpu_kit.IMAGE_LIST.read_text(), "image list")
    assert [a[0] for a in asked] == ["distributed", "mlcommons-loadgen", "nvtx", "pydantic", "ruptures", "sqlalchemy",
                                     "annotated-types", "dask", "locket", "pydantic-core", "tblib", "tornado",
                                     "typing-inspection", "zict", "partd"]
    assert {a[2:] for a in asked} == {("3.12", "manylinux_2_28_x86_64")}
    assert not (out / "stale-1.0-py3-none-any.whl").exists()
    assert sorted(p.name for p in out.glob("*.whl")) == sorted(w["file"] for w in m["wheels"])
    assert m["total_bytes"] == sum(p.stat().st_size for p in out.glob("*.whl"))
    assert json.loads((out / "manifest.json").read_text()) == m
    text = (out / "MANIFEST.txt").read_text()
    assert "15 wheels" in text and "    pydantic needs pydantic-core==2.50.5 (absent on the target)" in text


def test_over_the_limit_or_a_missing_freeze_is_one_line(tmp_path, monkeypatch, capsys):
    res = subprocess.run([sys.executable, str(SCRIPT), "--freeze", str(tmp_path / "absent.txt"), "--out",
                          str(tmp_path / "kit")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [f"gpu-kit: error: cannot read {tmp_path / 'absent.txt'}: "
                                       "No such file or directory"]
    big = {"wheels": [{"file": "huge-1-py3-none-any.whl", "size_bytes": 70 * 2**20, "why": ["dlperf needs huge"]}],
           "total_bytes": 70 * 2**20}
    monkeypatch.setattr(gpu_kit, "build_kit", lambda *a, **k: big)
    assert gpu_kit.main(["--out", str(tmp_path / "kit")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["gpu-kit: error: the kit is 70.0 MiB, over its 64.0 MiB limit (largest: huge-1-py3-none-any.whl, "
                   "70.0 MiB)"]

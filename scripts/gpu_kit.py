#!/usr/bin/env python3
"""`make gpu-kit`: the wheels of dlperf's own dependencies that a GPU node's Python lacks, for a node with no
package index (a cluster's compute node, a lent GPU machine).

What goes in is computed, not listed: pyproject.toml's dependencies and the extras the GPU check uses, minus what
the target already has (`--freeze FILE`, its `pip freeze`; else scripts/gpu_image_packages.txt, the lent GPU
machines' image), plus whatever those missing packages need in turn that the target lacks too. The resolution
(`resolve`) is a pure function of the requirements, the freeze and the wheels' metadata, so it is tested without
a network; `build_kit` fills in the metadata by downloading one wheel at a time (`pip download --no-deps`) until
nothing is missing. The kit never holds a framework's CUDA build (torch, JAX, CuPy, Triton, NVIDIA's libraries):
the node's own are what the check measures. It writes manifest.json and MANIFEST.txt (what, why, sizes) and
fails in one line when the wheels pass 64 MiB, what one device call carries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import email.parser
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # a bare Python: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_evidence import canonical_name, is_protected

ROOT = Path(__file__).resolve().parents[1]
IMAGE_LIST = Path(__file__).resolve().parent / "gpu_image_packages.txt"
LIMIT_BYTES = 64 * 1024 * 1024
#: The extras whose packages the GPU check imports: the frameworks it measures (their CUDA builds come with the
#: node), NVML/CuPy/NVTX, the runtimes, LoadGen for serving, Dask for the fleet (its GPU test was skipped on the
#: first H200 run for want of `distributed`), pytest for the GPU tests.
KIT_EXTRAS = ("torch", "jax", "gpu", "runtimes", "serving", "fleet", "dev")
#: Left out by name, whatever the target has: the check skips these frameworks where they are absent (a
#: TensorFlow or OpenVINO wheel alone passes the kit's 64 MiB), and the linters and browsers of `make test`.
SKIPPED = {
    "tensorflow-cpu": "TensorFlow: too large for the kit; the check skips it where the node has none",
    "tensorflow": "TensorFlow: too large for the kit; the check skips it where the node has none",
    "openvino": "OpenVINO: too large for the kit and CPU-only in dlperf; the check skips it where absent",
    "nncf": "NNCF: OpenVINO's int8 weight compression, of no use without OpenVINO (left out above)",
    "ruff": "a linter: `make test` uses it, the GPU check does not",
    "mypy": "the type checker: `make test` uses it, the GPU check does not",
    "playwright": "browser tests: `make test` uses it, the GPU check does not",
}


@dataclass(frozen=True)
class Dist:
    """What a wheel says of itself: its name, version and Requires-Dist lines."""

    name: str
    version: str
    requires: tuple[str, ...] = ()


@dataclass
class Fetch:
    """A wheel the kit must carry: the project, the versions allowed, the one chosen and why it is needed."""

    name: str
    specifier: str
    version: str | None = None
    why: list[str] = field(default_factory=list)


@dataclass
class Resolution:
    """What to fetch, what the target has, what is kept as the target has it, what is left out, and which
    names still need a wheel's metadata (name -> the versions allowed) before the resolution is complete."""

    fetch: list[Fetch] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    needs: dict[str, str] = field(default_factory=dict)


def target_env(python_version: str, machine: str = "x86_64") -> dict[str, str]:
    """The environment markers of a Linux CPython of `python_version` (e.g. "3.12") on `machine`."""
    if not re.fullmatch(r"3\.\d{1,2}", python_version):
        raise ValueError(f"--python-version {python_version!r}: expected 3.N, e.g. 3.12")
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": machine,
            "platform_release": "", "platform_version": "", "extra": ""}


def parse_freeze(text: str) -> dict[str, str | None]:
    """`pip freeze` (or `pip list --format=freeze`) text -> {canonical name: version, None where not given}.
    Comments, blank lines and pip's options are ignored; `name @ url` and `-e ...#egg=name` have no version."""
    installed: dict[str, str | None] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("-e") else raw.strip()
        if not line or (line.startswith("-") and "#egg=" not in line):
            continue
        if line.startswith("-e"):
            installed[canonical_name(line.split("#egg=", 1)[1].split("&")[0])] = None
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:===?\s*(\S+)|@\s*\S+)?\s*(?:;.*)?", line)
        if not m:
            raise ValueError(f"not a line of pip freeze: {raw.strip()!r}")
        installed[canonical_name(m.group(1))] = m.group(2)
    return installed


def project_requirements(pyproject_text: str, extras: tuple[str, ...] = KIT_EXTRAS) -> list[str]:
    """pyproject.toml's dependencies and those of the named extras, as written there."""
    project = tomllib.loads(pyproject_text)["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise ValueError(f"pyproject.toml has no extra {', '.join(unknown)} (it has {', '.join(optional)})")
    return list(project.get("dependencies", [])) + [r for e in extras for r in optional[e]]


def _satisfies(version: str | None, spec: SpecifierSet) -> bool:
    if version is None:
        return True
    try:
        return spec.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def resolve(requirements: list[str], installed: Mapping[str, str | None], env: Mapping[str, str],
            metadata: Mapping[str, Dist]) -> Resolution:
    """The wheels to fetch so that `requirements` hold on a target with `installed`, walking the missing
    packages' own requirements through `metadata` (canonical name -> the wheel that would be fetched).
    A name whose wheel is not in `metadata`, or whose wheel's version the requirements exclude, is returned in
    `needs`: fetch that, add its metadata, and call again."""
    res = Resolution()
    specs: dict[str, SpecifierSet] = {}
    why: dict[str, list[str]] = {}
    walked: dict[str, frozenset[str]] = {}
    wanted_extras: dict[str, set[str]] = {}
    queue: list[tuple[str, str, frozenset[str]]] = [(r, "dlperf", frozenset()) for r in requirements]
    while queue:
        text, parent, parent_extras = queue.pop(0)
        req = Requirement(text)
        name = canonical_name(req.name)
        if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in ("", *parent_extras)):
            continue
        said = f"{parent} needs {req.name}{req.specifier}" if str(req.specifier) else f"{parent} needs {req.name}"
        if name in SKIPPED:
            res.skipped.append(f"{name}: {SKIPPED[name]} ({said})")
            continue
        have = installed.get(name, "absent") if name in installed else "absent"
        if have != "absent" and _satisfies(have, req.specifier):
            res.present.append(f"{name} {have or '(version not given: assumed to satisfy)'}: {said}")
            continue
        if is_protected(name):
            state = f"the target has {have}" if have != "absent" else "the target has none"
            res.kept.append(f"{name}: {said}, {state}; never carried (the node's own build is what is measured)")
            continue
        specs[name] = specs.get(name, SpecifierSet()) & req.specifier
        reason = said + (f" (the target has {have})" if have != "absent" else " (absent on the target)")
        why.setdefault(name, [])
        if reason not in why[name]:
            why[name].append(reason)
        wanted_extras.setdefault(name, set()).update(canonical_name(e) for e in req.extras)
        dist = metadata.get(name)
        if dist is None or not _satisfies(dist.version, specs[name]):
            res.needs[name] = str(specs[name])
            continue
        res.needs.pop(name, None)
        extras = frozenset(wanted_extras[name])
        if walked.get(name) == extras:
            continue
        walked[name] = extras
        queue.extend((r, name, extras) for r in dist.requires)
    # a name can be walked, then asked for again with a tighter range its wheel fails: check every one at the end
    for name, spec in specs.items():
        dist = metadata.get(name)
        if dist is None or not _satisfies(dist.version, spec):
            res.needs[name] = str(spec)
    res.fetch = [Fetch(n, str(specs[n]), metadata[n].version if n in metadata else None, why[n])
                 for n in sorted(specs)]
    res.present, res.kept, res.skipped = sorted(set(res.present)), sorted(set(res.kept)), sorted(set(res.skipped))
    return res


def platform_tags(machine: str, glibc: str) -> list[str]:
    """Every manylinux tag a glibc of version `glibc` (e.g. "2.28") runs: pip matches each tag exactly."""
    m = re.fullmatch(r"2\.(\d{1,2})", glibc)
    if not m or int(m.group(1)) < 17:
        raise ValueError(f"--glibc {glibc!r}: expected 2.N with N >= 17, e.g. 2.28")
    tags = [f"manylinux_2_{n}_{machine}" for n in range(int(m.group(1)), 4, -1)]
    return tags + [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]


def wheel_dist(path: Path) -> Dist:
    """A wheel's name, version and requirements, from its METADATA."""
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        msg = email.parser.Parser().parsestr(zf.read(meta).decode("utf-8"))
    return Dist(msg["Name"], msg["Version"], tuple(msg.get_all("Requires-Dist") or ()))


def freeze_of_wheels(folder: Path) -> str:
    """`pip freeze` of what the wheels in `folder` install: name==version from each file name."""
    if not folder.is_dir():
        raise KitError(f"--target-wheels {folder}: no such folder")
    return "".join(f"{w.name.split('-')[0]}=={w.name.split('-')[1]}\n" for w in sorted(folder.glob("*.whl")))


class KitError(Exception):
    """What stops the kit, said in one line."""


def download(name: str, spec: str, dest: Path, python_version: str, tags: list[str]) -> Path:
    """One wheel of `name` within `spec` for the target, into `dest`, without its dependencies."""
    with tempfile.TemporaryDirectory(prefix="gpu-kit-") as tmp:
        abi = "cp" + python_version.replace(".", "")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "--python-version", python_version, "--implementation", "cp",
               "--abi", abi,
               *(a for t in tags for a in ("--platform", t)), "-d", tmp, f"{name}{spec}"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        got = sorted(Path(tmp).glob("*.whl"))
        if res.returncode != 0 or len(got) != 1:
            said = [ln for ln in (res.stderr + res.stdout).splitlines() if ln.startswith("ERROR")] or ["no wheel"]
            raise KitError(f"pip found no wheel of {name}{spec} for CPython {python_version} on {tags[0]}: "
                           f"{said[-1][:200]}")
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / got[0].name
        shutil.move(str(got[0]), target)
        return target


def build_kit(out: Path, python_version: str, freeze_text: str, freeze_source: str, machine: str = "x86_64",
              glibc: str = "2.28", extras: tuple[str, ...] = KIT_EXTRAS) -> dict:
    """Resolve, download until the resolution is complete, drop stale wheels, write the manifest; returns it."""
    env, tags = target_env(python_version, machine), platform_tags(machine, glibc)
    requirements = project_requirements((ROOT / "pyproject.toml").read_text(encoding="utf-8"), extras)
    installed = parse_freeze(freeze_text)
    metadata: dict[str, Dist] = {}
    files: dict[str, Path] = {}
    for _ in range(50):
        res = resolve(requirements, installed, env, metadata)
        if not res.needs:
            break
        for name, spec in sorted(res.needs.items()):
            old = files.pop(name, None)
            if old:
                old.unlink(missing_ok=True)
            files[name] = download(name, spec, out, python_version, tags)
            metadata[name] = wheel_dist(files[name])
    else:
        raise KitError(f"the resolution did not settle after 50 rounds: still needs {res.needs}")
    keep = {files[f.name].name for f in res.fetch}
    for stale in out.glob("*.whl"):
        if stale.name not in keep:
            stale.unlink()
    wheels = [{"file": files[f.name].name, "name": f.name, "version": f.version, "allowed": f.specifier or "any",
               "size_bytes": files[f.name].stat().st_size, "why": f.why} for f in res.fetch]
    total = sum(w["size_bytes"] for w in wheels)
    manifest = {"python_version": python_version, "platforms": tags, "freeze": freeze_source, "extras": list(extras),
                "created_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"), "wheels": wheels,
                "total_bytes": total, "limit_bytes": LIMIT_BYTES, "present_on_target": res.present,
                "kept_as_the_target_has_them": res.kept, "left_out_by_name": res.skipped}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (out / "MANIFEST.txt").write_text(render_manifest(manifest), encoding="utf-8")
    return manifest


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


def render_manifest(m: dict) -> str:
    """The manifest as a person reads it: each wheel with its size and why, then what was not carried."""
    lines = [f"dlperf GPU kit: CPython {m['python_version']}, {m['platforms'][0]} (and older), extras "
             f"{', '.join(m['extras'])}; target: {m['freeze']}; made {m['created_utc']} UTC",
             f"{len(m['wheels'])} wheels, {mib(m['total_bytes'])} (limit {mib(m['limit_bytes'])})", ""]
    for w in m["wheels"]:
        lines.append(f"{w['file']}  {mib(w['size_bytes'])}  ({w['name']} {w['allowed']})")
        lines += [f"    {y}" for y in w["why"]]
    for title, key in (("Kept as the target has them", "kept_as_the_target_has_them"),
                       ("Left out by name", "left_out_by_name"), ("Already on the target", "present_on_target")):
        lines += ["", f"{title}:"] + [f"  {x}" for x in m[key]] + ([] if m[key] else ["  (none)"])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_kit.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--python-version", default="3.12", help="the target's Python, 3.N (default 3.12)")
    ap.add_argument("--freeze", type=Path, help="the target's `pip freeze` (default: the lent GPU image's list)")
    ap.add_argument("--target-wheels", type=Path, metavar="DIR",
                    help="instead of --freeze: the target is what these wheels install (name==version of each)")
    ap.add_argument("--extras", default=",".join(KIT_EXTRAS), help=f"dlperf's extras to carry (default: "
                                                                   f"{','.join(KIT_EXTRAS)})")
    ap.add_argument("--out", type=Path, help="the kit's folder (default: gpu-kit/cpXY)")
    ap.add_argument("--machine", default="x86_64", choices=("x86_64", "aarch64"), help="the target's processor")
    ap.add_argument("--glibc", default="2.28", help="the oldest glibc the wheels may need (default 2.28)")
    ap.add_argument("--gpu-extra", default="gpu", choices=("gpu", "gpu-cuda12"),
                    help="the extra of NVML/CuPy/NVTX: gpu for a CUDA 13 driver (default), gpu-cuda12 for CUDA 12")
    args = ap.parse_args(argv)
    extras = tuple(args.gpu_extra if e == "gpu" else e for e in args.extras.split(",") if e)
    try:
        source = args.freeze or args.target_wheels or IMAGE_LIST
        try:
            freeze = freeze_of_wheels(source) if args.target_wheels else source.read_text(encoding="utf-8")
        except OSError as exc:
            raise KitError(f"cannot read {source}: {exc.strerror}") from None
        out = args.out or ROOT / "gpu-kit" / ("cp" + args.python_version.replace(".", ""))
        full = source.resolve()
        shown = str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(source)
        m = build_kit(out, args.python_version, freeze, shown, args.machine, args.glibc, extras)
    except (KitError, ValueError) as exc:
        print(f"gpu-kit: error: {exc}", file=sys.stderr)
        return 1
    for w in m["wheels"]:
        print(f"gpu-kit: {w['file']} ({mib(w['size_bytes'])}): {w['why'][0]}")
    if m["total_bytes"] > LIMIT_BYTES:
        big = max(m["wheels"], key=lambda w: w["size_bytes"])
        print(f"gpu-kit: error: the kit is {mib(m['total_bytes'])}, over its {mib(LIMIT_BYTES)} limit (largest: "
              f"{big['file']}, {mib(big['size_bytes'])})", file=sys.stderr)
        return 1
    print(f"gpu-kit: {len(m['wheels'])} wheels, {mib(m['total_bytes'])} of {mib(LIMIT_BYTES)} in {out} "
          f"(MANIFEST.txt says why each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

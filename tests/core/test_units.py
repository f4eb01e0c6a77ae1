"""units.py spells each figure exactly as the formatters it replaces did (pinned strings), and parses sizes
as the CLI's memory-size option always has."""

from __future__ import annotations

import math
import random

import pytest

from dlperf import units as U

NAN = float("nan")


def pin(fn, cases):
    """Every (value, expected text) of `cases`, as fn prints it."""
    got = [(v, fn(v)) for v, _ in cases]
    assert [t for _, t in got] == [t for _, t in cases], got


def test_missing_spellings():
    assert (U.MISSING, U.UNKNOWN, U.NOT_MEASURED) == ("-", "?", "not measured")
    assert (U.MIB_BYTES, U.GIB_BYTES, U.GB_BYTES) == (2**20, 2**30, 10**9)


def test_format_time_as_timing_format_time():
    pin(U.format_time, [(None, "-"), (NAN, "-"), (0, "0 ns"), (0.0, "0 ns"), (-0.0, "-0 ns"), (1.5e-9, "1.5 ns"),
                        (8.5e-7, "850 ns"), (1.234e-4, "123 us"), (0.00123, "1.23 ms"), (0.5, "500 ms"), (1, "1 s"),
                        (12.345, "12.3 s"), (999.9, "1e+03 s"), (1234.5, "1.23e+03 s"), (-0.0042, "-4.2 ms"),
                        (-2.5, "-2.5 s")])


def test_format_energy_as_timing_format_energy():
    pin(U.format_energy, [(None, "-"), (0, "0 uJ"), (-0.0, "-0 uJ"), (1.5e-9, "0.0015 uJ"), (8.5e-7, "0.85 uJ"),
                          (1.234e-4, "123 uJ"), (0.00123, "1.23 mJ"), (0.5, "500 mJ"), (1, "1 J"), (12.345, "12.3 J"),
                          (1234.5, "1.23e+03 J"), (-0.0042, "-4.2 mJ"), (-2.5, "-2.5 J")])


def test_timing_still_exports_the_formatters():
    from dlperf.timing import format_energy, format_time

    assert format_time is U.format_time and format_energy is U.format_energy


def test_format_joules_as_report_energy_text():
    pin(U.format_joules, [(None, "-"), (0.0123, "0.0123 J"), (123456.0, "1.23e+05 J"), (2.5, "2.5 J")])
    assert U.format_joules(2.5, estimate=True) == "~2.5 J est."
    assert U.format_joules(0.0123, estimate=True) == "~0.0123 J est."


def test_format_rate_as_report_rate():
    pin(U.format_rate, [(None, "-"), (0, "0"), (-0.0, "-0"), (1.5e-9, "1.5e-09"), (1.234e-4, "0.000123"),
                        (0.5, "0.5"), (12.345, "12.3"), (999.9, "1e+03"), (1234.5, "1.23k"), (5.81e6, "5.81M"),
                        (3.3e9, "3.3G"), (7.2e12, "7.2T"), (4.5e15, "4.5e+03T"), (-0.0042, "-0.0042"),
                        (-1234.5, "-1.23k")])
    pin(lambda v: U.format_rate(v, 1e9), [(None, "-"), (0, "0"), (5.81e6, "0.00581"), (3.3e9, "3.3"),
                                          (7.2e12, "7.2k"), (4.5e15, "4.5M"), (-1234.5, "-1.23e-06")])


def test_format_number_as_peaks_ops_maxbatch_and_compare_cells():
    # peaks_table._g: one decimal of GFLOP/s or GB/s (or TFLOP/s with scale 1e12)
    pin(lambda v: U.format_number(v, ".1f", scale=1e9), [(None, "-"), (0, "0.0"), (-0.0, "-0.0"), (0.5, "0.0"),
                                                         (3.3e9, "3.3"), (7.2e12, "7200.0"), (-2.5, "-0.0")])
    pin(lambda v: U.format_number(v, ".1f", scale=1e12), [(None, "-"), (7.2e12, "7.2"), (4.5e15, "4500.0")])
    # ops_report._fmt_mflops and _fmt_pct
    pin(lambda v: U.format_number(v, ",.2f", scale=1e6), [(None, "-"), (0, "0.00"), (1234.5, "0.00"),
                                                          (5.81e6, "5.81"), (1.23456789e10, "12,345.68")])
    pin(lambda v: U.format_number(v, ".2f"), [(None, "-"), (0, "0.00"), (12.345, "12.35"), (99.999, "100.00"),
                                              (-1.005, "-1.00")])
    # compare's ratio and p-value, maxbatch's s/image
    pin(lambda v: U.format_number(v, ".3f"), [(None, "-"), (1.0, "1.000"), (0.98765, "0.988"), (-2.0, "-2.000")])
    pin(U.format_number, [(None, "-"), (0.04567, "0.0457"), (1e-12, "1e-12"), (0, "0")])
    assert U.format_number(None, missing="n/a") == "n/a"


def test_format_figure_as_hw_num():
    pin(U.format_figure, [(None, "?"), ("unknown", "?"), (0, "0"), (-0.0, "-0"), (1.5e-9, "1.5e-09"),
                          (0.0001234, "0.0001234"), (12.345, "12.35"), (999.9, "999.9"), (1234.5, "1,234"),
                          (5.81e6, "5.81e+06"), (-1234.5, "-1,234"), ("Hopper", "Hopper"), (2022, "2,022"),
                          (1234567, "1.235e+06"), (True, "1")])
    pin(lambda v: U.format_figure(v, ".0f"), [(2022, "2022"), (None, "?"), (14.5, "14")])
    pin(lambda v: U.format_figure(v, ",.0f"), [(30000, "30,000"), (1499.5, "1,500"), (None, "?")])
    pin(lambda v: U.format_figure(v, ".3g"), [(123.456, "123"), (0.01234, "0.0123"), (None, "?"), ("unknown", "?")])
    pin(lambda v: U.format_figure(v, ".1f"), [(12.345, "12.3"), (None, "?")])


def test_format_pct_as_recommend_pct_and_percent_format():
    # recommend._pct: a signed relative error, "?" where none
    pin(lambda v: U.format_pct(v, "+.0f", missing=U.UNKNOWN),
        [(None, "?"), (0, "+0%"), (-0.0, "-0%"), (0.123, "+12%"), (-0.456, "-46%"), (1.5, "+150%"), (-0.004, "-0%"),
         (0.005, "+0%")])
    pin(U.format_pct, [(None, "-"), (0.25, "25%"), (0.125, "12%"), (-0.5, "-50%")])
    rng = random.Random(12)
    for x in [0, 0.005, 0.015, 0.125, 0.0049999, 1 / 3, *[rng.uniform(-2, 2) for _ in range(2000)]]:
        assert U.format_pct(x, ".1f") == f"{x:.1%}" and U.format_pct(x) == f"{x:.0%}", x


def test_format_iqr_as_recommend_iqr_and_tables():
    pin(U.format_iqr, [(None, "-"), (0, "0.0%"), (0.0123, "1.2%"), (0.1, "10.0%"), (1.234, "123.4%"),
                       (0.00049, "0.0%")])
    assert U.format_iqr(None, missing=U.UNKNOWN) == "?"


def test_format_mib_as_recommend_cnn_report_and_maxbatch():
    sizes = [(1, "0 MiB"), (2**20, "1 MiB"), (1.5 * 2**20, "2 MiB"), (1234567890, "1,177 MiB"),
             (2**40, "1,048,576 MiB")]
    pin(lambda v: U.format_mib(v, missing=U.UNKNOWN), [(None, "?"), (0, "0 MiB"), *sizes])  # recommend._mib
    pin(lambda v: U.format_mib(v or None), [(None, "-"), (0, "-"), *sizes])  # cnn_report._mib
    pin(lambda v: U.format_mib(v or None, missing=U.NOT_MEASURED), [(0, "not measured"), *sizes])  # maxbatch


def test_format_gb_and_gib():
    pin(lambda v: U.format_gb(v, named=False), [(None, "-"), (0, "0.00"), (2.345e9, "2.35"), (123e9, "123.00")])
    pin(U.format_gb, [(None, "-"), (2.345e9, "2.35 GB"), (24e9, "24.00 GB")])
    pin(U.format_gib, [(None, "-"), (2**30, "1.0 GiB"), (25232932864, "23.5 GiB")])
    assert U.format_gib(80 * 2**30, ".0f") == "80 GiB"


@pytest.mark.parametrize(("text", "mib"), [
    ("2GiB", 2048), ("512MiB", 512), ("1.5GB", 1430), ("300", 300), ("1", 1), (" 2 gib ", 2048), ("2g", 2048),
    ("2G", 2048), ("1024k", 1), ("1024KiB", 1), ("1100kb", 1), ("0.5GiB", 512), (".5g", 512), ("1t", 2**20),
    ("1TB", 953674), ("1tib", 2**20), ("3.999", 3), ("1.0", 1), ("2mb", 1), ("600MiB", 600),
])
def test_parse_size_mib(text, mib):
    assert U.parse_size_mib(text) == mib


@pytest.mark.parametrize("text", ["lots", "", "2XB", "2 G B", "-1", "1e3", "2b", "1pb", "2GiB foo", "1_000",
                                  "\u0661\u0662", "1.", "9" * 400 + "GiB", "2bit"])
def test_parse_size_mib_refuses_what_is_not_a_size(text):
    with pytest.raises(ValueError) as err:
        U.parse_size_mib(text)
    assert str(err.value) == f"{text!r} is not a memory size (e.g. 2GiB, 512MiB, or MiB as a number)"


@pytest.mark.parametrize("text", ["0", "0.5", "1023k", "0.0000001t", "1000kb"])
def test_parse_size_mib_refuses_less_than_one_mib(text):
    with pytest.raises(ValueError) as err:
        U.parse_size_mib(text)
    assert str(err.value) == f"{text!r} is less than 1 MiB"


def test_parse_size_mib_rounds_down_as_the_old_option_did():
    rng = random.Random(3)
    scale = {"": 2**20, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20,
             "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40}
    for _ in range(3000):
        num = rng.choice(["1", "2.5", ".25", "1023", "1048576", "3.999", "123456789", "12.5", "0.001", "7"])
        unit = rng.choice(list(scale))
        want = int(float(num) * scale[unit] / 2**20)
        if want >= 1:
            assert U.parse_size_mib(num + unit.upper()) == want, num + unit
    assert math.isclose(U.parse_size_mib("1.5GB"), 1.5e9 / 2**20, abs_tol=1)


def test_units_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, dlperf.units; print([m for m in ('pydantic', 'numpy') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

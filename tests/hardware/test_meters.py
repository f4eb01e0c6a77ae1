"""Energy meters driven through their real parsing code: fixture sysfs trees, a fake NVML, a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.meters import Empty, EnergyReading, JetsonMeter, MeterError, NvmlMeter, RaplMeter, make_meter
from dlperf.meters.estimate import tdp_estimate
from dlperf.meters.window import edp_js, measure_energy
from tests.conftest import FakeClock, run_cli


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


# -- RAPL -----------------------------------------------------------------------------------------
def rapl_tree(root: Path, energy_uj: int, max_uj: int = 262_143_328_850) -> None:
    write(root / "intel-rapl:0" / "energy_uj", str(energy_uj))
    write(root / "intel-rapl:0" / "max_energy_range_uj", str(max_uj))
    write(root / "intel-rapl:0" / "name", "package-0")
    # a sub-zone (core): part of package-0, must not be added again
    write(root / "intel-rapl:0:0" / "energy_uj", "999999999")
    write(root / "intel-rapl:0:0" / "max_energy_range_uj", str(max_uj))


def test_rapl_counts_packages_only_and_handles_wraparound(tmp_path):
    max_uj = 1_000_000_000
    rapl_tree(tmp_path, 999_000_000, max_uj)
    clock = FakeClock()
    meter = RaplMeter(tmp_path, clock=clock, poll_interval_s=None)
    assert meter.available()[0]
    meter.start()
    clock.advance(1.0)
    write(tmp_path / "intel-rapl:0" / "energy_uj", "500000")  # wrapped: 1 J to the top, then 0.5 J
    meter.poll()
    clock.advance(1.0)
    write(tmp_path / "intel-rapl:0" / "energy_uj", "3500000")  # +3 J
    r = meter.stop()
    assert r.energy_j == pytest.approx(1.0 + 0.5 + 3.0)
    assert r.window_s == 2.0 and r.method == "counter" and r.mean_power_w == pytest.approx(2.25)


def test_rapl_two_packages_are_summed(tmp_path):
    rapl_tree(tmp_path, 0)
    write(tmp_path / "intel-rapl:1" / "energy_uj", "0")
    write(tmp_path / "intel-rapl:1" / "max_energy_range_uj", "1000000000")
    clock = FakeClock()
    meter = RaplMeter(tmp_path, clock=clock, poll_interval_s=None)
    meter.start()
    write(tmp_path / "intel-rapl:0" / "energy_uj", "2000000")
    write(tmp_path / "intel-rapl:1" / "energy_uj", "1000000")
    clock.advance(1.0)
    assert meter.stop().energy_j == pytest.approx(3.0)


def test_rapl_absent_and_permission_denied(tmp_path, monkeypatch):
    ok, why = RaplMeter(tmp_path / "none").available()
    assert not ok and "no RAPL package zones" in why
    rapl_tree(tmp_path, 5)

    def deny(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", deny)
    ok, why = RaplMeter(tmp_path).available()
    assert not ok and "permission denied" in why and "energy_uj" in why


# -- Jetson ---------------------------------------------------------------------------------------
def tx2_iio(root: Path, vdd_in_mw: int) -> None:
    dev = root / "0-0040" / "iio:device0"
    for i, (name, mw) in enumerate([("VDD_IN", vdd_in_mw), ("VDD_SYS_GPU", 1234), ("NC", 0)]):
        write(dev / f"rail_name_{i}", name)
        write(dev / f"in_power{i}_input", str(mw))


def orin_hwmon(root: Path, mv: int, ma: int) -> None:
    mon = root / "1-0040" / "hwmon" / "hwmon3"
    for i, (label, v, c) in enumerate([("VDD_IN", mv, ma), ("VDD_CPU_GPU_CV", 5000, 100), ("NC", 0, 0)], start=1):
        write(mon / f"in{i}_label", label)
        write(mon / f"in{i}_input", str(v))
        write(mon / f"curr{i}_input", str(c))


def test_jetson_tx2_iio_layout(tmp_path):
    iio = tmp_path / "ina3221x"
    tx2_iio(iio, 4000)
    clock = FakeClock()
    meter = JetsonMeter(iio, tmp_path / "none", tmp_path / "none", clock=clock, poll_interval_s=None)
    ok, why = meter.available()
    assert ok and "VDD_IN" in why and "NC" not in why
    meter.start()  # samples 4 W
    for mw in (6000, 6000):
        clock.advance(0.5)
        write(iio / "0-0040" / "iio:device0" / "in_power0_input", str(mw))
        meter.poll()
    clock.advance(0.5)
    r = meter.stop()  # samples at t = 0, 0.5, 1.0, 1.5 of 4, 6, 6, 6 W
    assert r.energy_j == pytest.approx(0.5 * 5 + 0.5 * 6 + 0.5 * 6)
    assert r.meter == "jetson:VDD_IN" and r.method == "polling" and r.n_samples == 4


def test_jetson_orin_hwmon_layout(tmp_path):
    hw = tmp_path / "ina3221"
    orin_hwmon(hw, 5000, 1200)  # 5 V x 1.2 A = 6 W
    clock = FakeClock()
    meter = JetsonMeter(tmp_path / "none", hw, tmp_path / "none", clock=clock, poll_interval_s=None)
    assert set(meter.rails()) == {"VDD_IN", "VDD_CPU_GPU_CV"}  # NC skipped
    meter.start()
    clock.advance(1.0)
    meter.poll()
    clock.advance(1.0)
    assert meter.stop().energy_j == pytest.approx(12.0)


def test_ina226_and_missing_total_rail(tmp_path):
    write(tmp_path / "hwmon" / "hwmon0" / "name", "ina226")
    write(tmp_path / "hwmon" / "hwmon0" / "power1_input", "7500000")  # uW
    meter = JetsonMeter(tmp_path / "a", tmp_path / "b", tmp_path / "hwmon")
    assert meter.available() == (True, "rail INA226 of INA226")
    only_gpu = tmp_path / "gpu_only"
    dev = only_gpu / "0-0041" / "iio:device1"
    write(dev / "rail_name_0", "VDD_SYS_GPU")
    write(dev / "in_power0_input", "100")
    ok, why = JetsonMeter(only_gpu, tmp_path / "b", tmp_path / "c").available()
    assert not ok and "no total rail" in why


def test_polling_window_too_short_is_an_error_not_a_number(tmp_path):
    tx2_iio(tmp_path, 1000)
    meter = JetsonMeter(tmp_path, tmp_path / "x", tmp_path / "y", clock=FakeClock(), poll_interval_s=None)
    meter.start()
    with pytest.raises(MeterError, match="window too short"):
        meter.stop()


# -- NVML -----------------------------------------------------------------------------------------
class FakeNvml:
    """Replays recorded values: the energy counter (mJ) or power (mW), one per call."""

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, energy_mj=None, power_mw=None):
        self.energy = list(energy_mj) if energy_mj is not None else None
        self.power = list(power_mw or [])

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"gpu{i}"

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if self.energy is None:
            raise self.NVMLError_NotSupported()
        return self.energy.pop(0) if len(self.energy) > 1 else self.energy[0]

    def nvmlDeviceGetPowerUsage(self, h):
        return self.power.pop(0)


def test_nvml_energy_counter(tmp_path):
    clock = FakeClock()
    nv = FakeNvml(energy_mj=[100_000, 100_000, 100_500, 101_000, 101_800])
    meter = NvmlMeter(0, nvml=nv, clock=clock, poll_interval_s=None)
    meter.start()
    for _ in range(3):
        clock.advance(0.5)
        meter.poll()
    clock.advance(0.5)
    r = meter.stop()
    assert r.method == "counter" and r.energy_j == pytest.approx(1.8) and r.window_s == 2.0
    assert r.n_samples == 4  # distinct counter values seen


def test_nvml_counter_that_did_not_update_is_too_short():
    meter = NvmlMeter(0, nvml=FakeNvml(energy_mj=[5_000]), clock=FakeClock(), poll_interval_s=None)
    meter.start()
    with pytest.raises(MeterError, match="too short"):
        meter.stop()


def test_nvml_power_polling_before_volta():
    clock = FakeClock()
    meter = NvmlMeter(0, nvml=FakeNvml(power_mw=[100_000, 200_000, 200_000]), clock=clock, poll_interval_s=None)
    meter.start()  # 100 W at t=0
    clock.advance(1.0)
    meter.poll()  # 200 W at t=1
    clock.advance(1.0)
    r = meter.stop()  # 200 W at t=2
    assert r.method == "polling" and r.energy_j == pytest.approx(150 + 200)


# -- arithmetic, window, factory, estimate ----------------------------------------------------------
def test_edp_and_dynamic_energy():
    r = EnergyReading("m", "counter", energy_j=30.0, window_s=2.0, n_samples=2, idle_power_w=5.0)
    assert r.mean_power_w == 15.0
    assert r.dynamic_energy_j == 20.0  # 30 J - 5 W x 2 s
    assert edp_js(30.0, 2.0) == 60.0
    assert EnergyReading("m", "counter", 1.0, 1.0, 2).dynamic_energy_j is None


def test_measure_energy_window_and_baseline(tmp_path):
    rapl_tree(tmp_path, 0)
    clock = FakeClock()
    meter = RaplMeter(tmp_path, clock=clock, poll_interval_s=None)
    counter = {"uj": 0}
    syncs = []

    def sleep(s):  # idle: 2 W
        clock.advance(s)
        counter["uj"] += int(2e6 * s)
        write(tmp_path / "intel-rapl:0" / "energy_uj", str(counter["uj"]))

    def fn():  # each call: 10 ms at 12 W
        clock.advance(0.01)
        counter["uj"] += int(12 * 0.01 * 1e6)
        write(tmp_path / "intel-rapl:0" / "energy_uj", str(counter["uj"]))

    out = measure_energy(meter, fn, lambda: syncs.append(1), per_call_s=0.01, idle_s=1.0, sleep=sleep)
    assert out["measured"] and out["calls"] == 5  # min window 0.05 s / 0.01 s
    assert out["idle_power_w"] == pytest.approx(2.0)
    assert out["energy_per_call_j"] == pytest.approx(0.12)
    assert out["dynamic_energy_per_call_j"] == pytest.approx(0.10)
    assert len(syncs) == 2


def test_empty_meter_records_the_reason():
    out = measure_energy(Empty("not measured: no RAPL here"), lambda: None, lambda: None, per_call_s=1.0)
    assert out == {"measured": False, "reason": "not measured: no RAPL here"}


def test_factory_on_this_machine_says_why():
    meter = make_meter("cpu")
    ok, why = meter.available()
    if isinstance(meter, Empty):
        assert not ok and why.startswith("not measured: rapl: ") and "jetson:" in why
    else:
        assert ok


def test_tdp_estimate_is_labelled():
    e = tdp_estimate(tdp_w=100.0, cpu_time_s=3.0, wall_s=2.0, cores=2)
    assert e["kind"] == "estimate" and e["utilisation"] == 0.75 and e["energy_j"] == 150.0
    with pytest.raises(ValueError):
        tdp_estimate(tdp_w=0, cpu_time_s=1, wall_s=1, cores=1)


def test_doctor_and_factory_agree():
    res = run_cli("doctor")
    meter = make_meter("cpu")
    if isinstance(meter, Empty):
        assert "no energy meter available" in res.stdout

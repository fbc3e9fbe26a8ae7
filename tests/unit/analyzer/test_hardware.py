"""The hardware fingerprint recorded with every point, and the checkpoint never reusing a point
measured on other hardware."""

from __future__ import annotations

import os

from tritonctl.analyzer.checkpoint import Checkpoint
from tritonctl.analyzer.hardware import TAG_ENV, describe, fingerprint, fingerprint_id
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Knobs

SETTINGS = {"model": "m", "measurement_interval_ms": 500.0}


def test_the_fingerprint_names_this_machine_and_its_id_hashes_the_values(monkeypatch):
    monkeypatch.delenv(TAG_ENV, raising=False)
    values = fingerprint()
    assert values["cores"] == len(os.sched_getaffinity(0)) and values["memory_gib"] > 0 and values["cpu"]
    assert values["id"] == fingerprint_id(values) and len(values["id"]) == 12
    assert f"{values['cores']} cores" in describe(values)
    monkeypatch.setenv(TAG_ENV, "throttled-vm")
    tagged = fingerprint()
    assert tagged["tag"] == "throttled-vm" and tagged["id"] != values["id"]
    assert "tag throttled-vm" in describe(tagged)


def test_a_point_of_other_hardware_is_kept_but_never_reused(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    checkpoint.record(Point("a", "h", Knobs(8), False, 4, "explore", throughput=5.0, p99_ms=1.0, hardware="node-x"))
    checkpoint.record(Point("a", "h", Knobs(8), False, 8, "explore", throughput=7.0, p99_ms=1.0, hardware="node-y"))
    checkpoint.close()
    resumed = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    assert resumed.lookup("a", "h", 4, 0, "node-x").throughput == 5.0
    assert resumed.lookup("a", "h", 4, 0, "node-y") is None and resumed.lookup("a", "h", 8, 0, "node-x") is None
    assert resumed.lookup("a", "h", 8, 0, "node-y").hardware == "node-y"
    resumed.record(Point("a", "h", Knobs(8), False, 4, "explore", throughput=9.0, p99_ms=1.0, hardware="node-y"))
    resumed.close()
    again = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    assert again.lookup("a", "h", 4, 0, "node-x").throughput == 5.0
    assert again.lookup("a", "h", 4, 0, "node-y").throughput == 9.0
    assert len(again.recorded) == 3


def test_a_point_recorded_before_fingerprints_counts_as_this_machines(tmp_path):
    checkpoint = Checkpoint.open(tmp_path, SETTINGS, resume=False, overwrite=False)
    checkpoint.record(Point("a", "h", Knobs(8), False, 4, "explore", throughput=5.0, p99_ms=1.0))
    checkpoint.close()
    resumed = Checkpoint.open(tmp_path, SETTINGS, resume=True, overwrite=False)
    assert resumed.lookup("a", "h", 4, 0, fingerprint()["id"]).throughput == 5.0


def test_gpus_are_read_from_nvidia_smi_csv():
    from tritonctl.analyzer.hardware import parse_gpu_list

    output = "NVIDIA H100 80GB HBM3, 81559 MiB\nNVIDIA H100 80GB HBM3, 81559 MiB\n\n"
    gpus = parse_gpu_list(output)
    assert gpus == ["NVIDIA H100 80GB HBM3 (81559 MiB)"] * 2
    assert "2 x NVIDIA H100 80GB HBM3 (81559 MiB)" in describe({"cpu": "x", "cores": 16, "memory_gib": 125,
                                                                 "gpus": gpus})
    assert parse_gpu_list("Tesla T4\n") == ["Tesla T4"] and parse_gpu_list("") == []

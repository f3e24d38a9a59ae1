"""Issue 42, 2: devices paired with the session host (host/devices.py), in process: codes
single-use and short-lived, the credential never written, the file private and refused
when it is not, names checked, a revoked device's credential worthless."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host import devices as devices_module
from acpctl.host.devices import Devices


def test_a_code_pairs_once_and_the_file_keeps_no_credential(tmp_path: Path) -> None:
    path = tmp_path / "config" / "host-devices.json"
    devices = Devices(path)
    code, name = devices.pairing_code(acp.CONTROLLER, "phone")
    assert name == "phone"
    paired = devices.redeem(code)
    assert paired is not None
    device, credential = paired
    assert (device.name, device.role) == ("phone", acp.CONTROLLER)
    assert devices.redeem(code) is None  # single use
    assert devices.device_of(credential) is device
    assert devices.device_of(credential + "x") is None
    written = path.read_text()
    assert credential not in written and code not in written
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = Devices(path)  # as the next host reads it
    assert again.device_of(credential) is not None
    assert [d["name"] for d in again.listed()] == ["phone"]
    assert "digest" not in again.listed()[0]


def test_a_code_lapses_and_the_outstanding_ones_are_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    devices = Devices(tmp_path / "devices.json")
    devices.pairing_code(acp.OBSERVER, None)  # "device 1", never redeemed
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    fresh, name = devices.pairing_code(acp.OBSERVER, None)
    assert name == "device 2"  # "device 1" waits for the first code
    clock[0] += devices_module.PAIR_CODE_TTL_S + 1
    assert devices.redeem(fresh) is None  # lapsed
    codes = [devices.pairing_code(acp.CONTROLLER, f"d{n}")[0] for n in range(40)]
    assert devices.redeem(codes[0]) is None  # the oldest made way
    assert devices.redeem(codes[-1]) is not None


def test_names_are_checked_unique_and_a_revoked_device_is_out(tmp_path: Path) -> None:
    devices = Devices(tmp_path / "devices.json")
    for bad in ("", " phone", "x" * 65, "tab\there", "esc\x1b[2J"):
        with pytest.raises(AcpctlError):
            devices.pairing_code(acp.CONTROLLER, bad)
    code, _ = devices.pairing_code(acp.CONTROLLER, "phone")
    with pytest.raises(AcpctlError, match="paired already"):
        devices.pairing_code(acp.CONTROLLER, "phone")  # waits to be
    paired = devices.redeem(code)
    assert paired is not None
    devices.revoke("phone")
    assert devices.device_of(paired[1]) is None
    with pytest.raises(AcpctlError, match="no device named 'phone'"):
        devices.revoke("phone")
    with pytest.raises(AcpctlError, match="no device role"):
        devices.pairing_code("admin", "x")


def test_a_devices_file_others_can_read_or_that_is_garbage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "devices.json"
    path.write_text(json.dumps({"devices": []}))
    path.chmod(0o644)
    with pytest.raises(AcpctlError, match="chmod 600"):
        Devices(path)
    path.chmod(0o600)
    path.write_text("{not json")
    with pytest.raises(AcpctlError, match="not a devices file"):
        Devices(path)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AcpctlError, match="not a regular file"):
        Devices(path)

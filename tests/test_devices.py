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
    device, credential, key = paired
    assert (device.name, device.role) == ("phone", acp.CONTROLLER)
    assert devices.redeem(code) is None  # single use
    assert devices.device_of(credential, key) is device
    assert devices.device_of(credential + "x", key) is None
    # The cookie alone (what another server of this machine is sent) is no device.
    assert devices.device_of(credential, "") is None
    assert devices.device_of(credential, key + "x") is None
    written = path.read_text()
    assert credential not in written and code not in written and key not in written
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = Devices(path)  # as the next host reads it
    assert again.device_of(credential, key) is not None
    assert [d["name"] for d in again.listed()] == ["phone"]
    assert "digest" not in again.listed()[0]


def test_a_code_lapses_and_the_outstanding_ones_are_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    devices = Devices(tmp_path / "devices.json")
    # The clock is the test's from the first code on: a machine up for less than the
    # codes' lifetime reads a small monotonic time (issue 53).
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    devices.pairing_code(acp.OBSERVER, None)  # "device 1", never redeemed
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
    assert devices.device_of(paired[1], paired[2]) is None
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


def test_pairing_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that cannot be written (a full disk) pairs nothing and leaves the code good;
    a device whose answer was lost is unpaired, its code good again; a last-seen time that
    cannot be written is tried later, not an error; a device from a file before keys
    matches nothing (it pairs again)."""
    import errno

    path = tmp_path / "devices.json"
    devices = Devices(path)
    code, _ = devices.pairing_code(acp.CONTROLLER, "phone")
    real_write = devices._write
    full = [True]

    def write() -> None:
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write()

    monkeypatch.setattr(devices, "_write", write)
    with pytest.raises(AcpctlError, match=r"not paired: .* \(No space left on device\)"):
        devices.redeem(code)
    assert devices.listed() == []
    full[0] = False
    paired = devices.redeem(code)  # the same code, once there is room
    assert paired is not None
    devices.unpair(paired[0], code)  # its answer never reached the page
    assert devices.listed() == [] and devices.device_of(paired[1], paired[2]) is None
    again = devices.redeem(code)
    assert again is not None
    full[0] = True
    devices.seen(again[0])  # no error: written when the disk has room
    full[0] = False
    stored = json.loads(path.read_text())
    for entry in stored["devices"]:
        del entry["key"]
    path.write_text(json.dumps(stored))
    assert Devices(path).device_of(again[1], "") is None
    assert Devices(path).device_of(again[1], again[2]) is None

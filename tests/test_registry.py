"""Issue 18: the catalog from the ACP registry, `agents update`, and installs of npx, uvx
and binary distributions, against a registry and archives served on 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acpctl.agents import catalog, installer, registry
from acpctl.agents.limits import Limits
from acpctl.errors import AcpctlError
from tests.conftest import acpctl_argv, cli, run_cli, write_executable
from tests.registry_server import RegistryServer, serve

AGENT_ID = "script-agent"


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    with serve() as running:
        yield running


def script(version: str) -> bytes:
    """A small agent: prints its version, else runs acpctl's demo agent."""
    return (
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "script-agent {version}"; exit 0; fi\n'
        f'exec "{sys.executable}" -m acpctl.demo_agent "$@"\n'
    ).encode()


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def file_member(name: str, mode: int = 0o755) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info


def link_member(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100755 << 16) if data.startswith(b"#!") else 0o100644 << 16
            zipped.writestr(info, data)
    return buffer.getvalue()


def document(*agents: dict[str, Any]) -> bytes:
    return json.dumps({"version": "1.0.0", "agents": list(agents), "extensions": []}).encode()


def binary_agent(
    server: RegistryServer, version: str, archive: bytes, name: str, cmd: str, sha: str | None
) -> dict[str, Any]:
    server.routes[f"/dl/{name}"] = archive
    target: dict[str, Any] = {"archive": server.url(f"/dl/{name}"), "cmd": cmd}
    if sha != "":
        target["sha256"] = sha or hashlib.sha256(archive).hexdigest()
    return {
        "id": AGENT_ID,
        "name": "Script Agent",
        "version": version,
        "description": "a test agent",
        "distribution": {"binary": {catalog.platform_key(): target}},
    }


def publish(server: RegistryServer, *agents: dict[str, Any]) -> str:
    server.routes["/registry.json"] = document(*agents)
    return server.url("/registry.json")


def cli_ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = run_cli(*args, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def listed(name: str) -> dict[str, Any]:
    records = json.loads(cli_ok("agents", "list", "--json"))
    return next(r for r in records if r["name"] == name)


# -- the registry document -------------------------------------------------------------


def test_the_shipped_snapshot_is_a_valid_registry() -> None:
    snapshot = json.loads(registry.SNAPSHOT.read_bytes())
    registry.validate(snapshot)
    assert len(snapshot["agents"]) >= 39


def test_a_document_that_breaks_the_schema_is_named_where(home: Path) -> None:
    with pytest.raises(AcpctlError, match=r"at agents/0/distribution/npx: 'package'"):
        registry.validate(
            {
                "version": "1.0.0",
                "agents": [
                    {
                        "id": "x",
                        "name": "X",
                        "version": "1.0.0",
                        "description": "d",
                        "distribution": {"npx": {}},
                    }
                ],
            }
        )


def test_catalog_is_the_registry_with_the_overlay_and_aliases(home: Path) -> None:
    entries = catalog.entries()
    snapshot = json.loads(registry.SNAPSHOT.read_bytes())
    ids = {entry.id for entry in entries.values()}
    assert {agent["id"] for agent in snapshot["agents"]} <= ids
    claude = catalog.lookup("claude")
    assert claude is not None and claude is catalog.lookup("claude-acp")
    package = claude.distributions["npx"].package
    assert package is not None and package.startswith("@agentclientprotocol/claude-agent-acp@")
    assert "claude-agent-acp" in claude.binaries
    pi = catalog.lookup("pi")
    assert pi is not None and pi.kind == "pi-rpc"
    package = pi.distributions["npx"].package
    assert package is not None and package.startswith("@earendil-works/pi-coding-agent@")


@pytest.mark.e2e
def test_update_fetches_then_gets_304_and_the_catalog_follows(
    home: Path, server: RegistryServer
) -> None:
    url = publish(server, binary_agent(server, "1.0.0", b"x", "a.tar.gz", "./a", None))
    first = cli_ok("agents", "update", "--from", url)
    assert "registry updated" in first and f"new: {AGENT_ID} 1.0.0" in first
    second = cli_ok("agents", "update", "--from", url)
    assert "up to date" in second
    assert [status for _, status in server.requests] == [200, 304]
    record = listed(AGENT_ID)
    assert record["registry_version"] == "1.0.0" and record["distributions"] == ["binary"]
    assert record["found"] is False
    # every agent of the registry is listed, and only those (plus pi's RPC mode, the demo)
    names = {r["id"] for r in json.loads(cli_ok("agents", "list", "--json", "--no-probe"))}
    assert names == {AGENT_ID, "pi", None}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "body,message",
    [
        (b"{not json", "is not JSON"),
        (b'{"version": "1.0.0", "agents": [{"id": "Bad Id"}]}', "not a valid ACP registry"),
    ],
)
def test_a_malformed_registry_leaves_the_copy_unchanged(
    home: Path, server: RegistryServer, body: bytes, message: str
) -> None:
    url = publish(server, binary_agent(server, "1.0.0", b"x", "a.tar.gz", "./a", None))
    cli_ok("agents", "update", "--from", url)
    before = registry.cached_document().read_bytes()
    server.routes["/registry.json"] = body
    result = run_cli("agents", "update", "--from", url)
    assert result.returncode == 1 and message in result.stderr
    assert result.stderr.count("\n") <= 2  # one line (and a hint)
    assert registry.cached_document().read_bytes() == before


@pytest.mark.e2e
def test_a_dead_url_says_offline_in_one_line(home: Path, server: RegistryServer) -> None:
    port = server.server.server_address[1]
    server.server.shutdown()
    server.server.server_close()
    result = run_cli("agents", "update", "--from", f"http://127.0.0.1:{port}/registry.json")
    assert result.returncode == 1
    assert "cannot reach" in result.stderr and "unchanged" in result.stderr
    assert "Traceback" not in result.stderr
    assert not registry.cached_document().exists()


@pytest.mark.e2e
def test_update_from_a_file(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_bytes(document())
    assert "0 agents" in cli_ok("agents", "update", "--from", str(path))
    missing = run_cli("agents", "update", "--from", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


# -- binary installs ---------------------------------------------------------------------


@pytest.mark.e2e
def test_install_run_upgrade_and_uninstall_a_binary_agent(
    home: Path, server: RegistryServer
) -> None:
    v1 = tar_gz(
        [
            (file_member("agent-1/bin/script-agent"), script("1.0.0")),
            (file_member("agent-1/README", 0o644), b"hello"),
            (link_member("agent-1/bin/alias", "script-agent"), b""),  # a link inside: fine
        ]
    )
    url = publish(server, binary_agent(server, "1.0.0", v1, "a.tar.gz", "./agent-1/bin/x", None))
    cli_ok("agents", "update", "--from", url)
    refused = run_cli("agents", "install", AGENT_ID)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    missing_cmd = run_cli("agents", "install", AGENT_ID, "--yes")
    assert missing_cmd.returncode == 1 and "has no ./agent-1/bin/x" in missing_cmd.stderr
    assert not (home / "data" / "agents" / AGENT_ID / "1.0.0").exists()

    cmd = "./agent-1/bin/script-agent"
    url = publish(server, binary_agent(server, "1.0.0", v1, "a.tar.gz", cmd, None))
    cli_ok("agents", "update", "--from", url)
    out = cli_ok("agents", "install", AGENT_ID, "--yes")
    assert f"installed {AGENT_ID} 1.0.0" in out
    record = listed(AGENT_ID)
    assert record["installed_from"] == "acpctl" and record["version"] == "1.0.0"
    assert record["update_available"] is False
    assert "already installed" in cli_ok("agents", "install", AGENT_ID, "--yes")
    assert "You said: hi" in cli_ok("run", "--agent", AGENT_ID, "hi")

    v2 = zip_bytes({"agent-2/bin/script-agent": script("2.0.0"), "agent-2/notes.txt": b"n"})
    url = publish(
        server, binary_agent(server, "2.0.0", v2, "a.zip", "./agent-2/bin/script-agent", None)
    )
    cli_ok("agents", "update", "--from", url)
    assert listed(AGENT_ID)["update_available"] is True
    # off a terminal an upgrade is not made unasked (issue 31, 9): --yes, as install
    unasked = run_cli("agents", "upgrade", "--all")
    assert unasked.returncode == 2 and "pass --yes" in unasked.stderr
    assert listed(AGENT_ID)["version"] == "1.0.0"
    out = cli_ok("agents", "upgrade", "--all", "--yes")
    assert "1.0.0 -> 2.0.0" in out and "removed the previous version" in out
    assert listed(AGENT_ID)["version"] == "2.0.0"
    assert not (home / "data" / "agents" / AGENT_ID / "1.0.0").exists()
    assert "latest" in cli_ok("agents", "upgrade", AGENT_ID)
    assert "You said: again" in cli_ok("run", "--agent", AGENT_ID, "again")

    # a live run holds it: uninstall refuses
    run = subprocess.Popen(
        acpctl_argv("run", "--acp", "--agent", AGENT_ID),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        runs = home / "state" / "runs"
        deadline = time.monotonic() + 20
        while not (runs.is_dir() and any(runs.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.05)
        held = run_cli("agents", "uninstall", AGENT_ID)
        assert held.returncode == 2 and f"run pid {run.pid}" in held.stderr
        assert "end the run first" in held.stderr and "editor entry" not in held.stderr
    finally:
        run.terminate()
        run.wait(10)
    # an editor entry holds it: uninstall refuses, with the way out
    (home / ".acpx").mkdir()
    cli_ok("install", "acpx", "--agent", AGENT_ID)
    held = run_cli("agents", "uninstall", AGENT_ID)
    assert held.returncode == 2 and "acpx entry" in held.stderr
    assert "end the run" not in held.stderr  # no run is live (issue 31, 13)
    assert "acpctl uninstall CLIENT" in held.stderr
    cli_ok("uninstall", "acpx", "--agent", AGENT_ID)
    assert "uninstalled" in cli_ok("agents", "uninstall", AGENT_ID)
    assert not (home / "data" / "agents" / AGENT_ID).exists()
    assert listed(AGENT_ID)["found"] is False


@pytest.mark.e2e
def test_a_checksum_mismatch_installs_nothing(home: Path, server: RegistryServer) -> None:
    archive = tar_gz([(file_member("a/script-agent"), script("1.0.0"))])
    url = publish(server, binary_agent(server, "1.0.0", archive, "a.tgz", "./a/x", "0" * 64))
    cli_ok("agents", "update", "--from", url)
    result = run_cli("agents", "install", AGENT_ID, "--yes")
    assert result.returncode == 1 and "does not match the registry's sha256" in result.stderr
    assert list((home / "data" / "agents" / AGENT_ID).iterdir()) == []


@pytest.mark.e2e
def test_a_dead_archive_url_installs_nothing(home: Path, server: RegistryServer) -> None:
    url = publish(server, binary_agent(server, "1.0.0", b"x", "gone.tgz", "./a", None))
    del server.routes["/dl/gone.tgz"]
    cli_ok("agents", "update", "--from", url)
    result = run_cli("agents", "install", AGENT_ID, "--yes")
    assert result.returncode == 1 and "404" in result.stderr and "Traceback" not in result.stderr
    assert list((home / "data" / "agents" / AGENT_ID).iterdir()) == []


@pytest.mark.e2e
@pytest.mark.parametrize(
    "archive,name,problem",
    [
        (tar_gz([(file_member("../evil"), b"x")]), "a.tar.gz", "would land outside"),
        (tar_gz([(link_member("a/link", "/etc/passwd"), b"")]), "b.tar.gz", "absolute path"),
        (tar_gz([(link_member("a/up", "../../x"), b"")]), "c.tar.gz", "links outside"),
        (zip_bytes({"../../evil": b"x"}), "d.zip", "would land outside"),
        (zip_bytes({"/abs/evil": b"x"}), "e.zip", "would land outside"),
    ],
    ids=["tar-dotdot", "tar-absolute-link", "tar-link-up", "zip-dotdot", "zip-absolute"],
)
def test_unsafe_archives_are_refused_and_nothing_lands(
    home: Path, server: RegistryServer, tmp_path: Path, archive: bytes, name: str, problem: str
) -> None:
    url = publish(server, binary_agent(server, "1.0.0", archive, name, "./a/x", ""))
    cli_ok("agents", "update", "--from", url)
    result = run_cli("agents", "install", AGENT_ID, "--yes")
    assert result.returncode == 1 and problem in result.stderr, result.stderr
    agents = home / "data" / "agents"
    assert list((agents / AGENT_ID).iterdir()) == []
    assert not (agents / "evil").exists() and not (home / "data" / "evil").exists()


@pytest.mark.e2e
def test_a_raw_binary_is_saved_under_its_command_name(home: Path, server: RegistryServer) -> None:
    url = publish(server, binary_agent(server, "1.0.0", script("1.0.0"), "tool", "./tool", None))
    cli_ok("agents", "update", "--from", url)
    cli_ok("agents", "install", AGENT_ID, "--yes")
    assert listed(AGENT_ID)["version"] == "1.0.0"


@pytest.mark.e2e
def test_a_version_the_registry_has_no_archive_for_is_refused(
    home: Path, server: RegistryServer
) -> None:
    url = publish(server, binary_agent(server, "1.0.0", b"x", "a.tgz", "./a", None))
    cli_ok("agents", "update", "--from", url)
    result = run_cli("agents", "install", AGENT_ID, "--version", "0.9.0", "--yes")
    assert result.returncode == 2 and "archives of script-agent 1.0.0 only" in result.stderr


@pytest.mark.e2e
def test_install_client_offers_to_install_the_agent(home: Path, server: RegistryServer) -> None:
    archive = tar_gz([(file_member("a/script-agent"), script("1.0.0"))])
    url = publish(server, binary_agent(server, "1.0.0", archive, "a.tgz", "./a/script-agent", None))
    cli_ok("agents", "update", "--from", url)
    (home / ".acpx").mkdir()
    unasked = run_cli("install", "acpx", "--agent", AGENT_ID)
    assert unasked.returncode == 0 and "not installed yet" in unasked.stderr
    out = cli_ok("install", "acpx", "--agent", AGENT_ID, "--yes")
    assert f"installed {AGENT_ID} 1.0.0" in out
    assert listed(AGENT_ID)["installed_from"] == "acpctl"


# -- unit checks of the pieces -------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,name",
    [
        ("@scope/pkg@1.2.3", "@scope/pkg"),
        ("pkg@1.0", "pkg"),
        ("fast-agent-acp==0.10.1", "fast-agent-acp"),
        ("plain", "plain"),
    ],
)
def test_package_name(spec: str, name: str) -> None:
    assert installer.package_name(spec) == name


def test_extract_keeps_links_inside(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_gz([(file_member("d/f"), b"x"), (link_member("d/sub/l", "../f"), b"")]))
    root = tmp_path / "out"
    root.mkdir()
    installer.extract_tar(archive, root)
    assert (root / "d" / "sub" / "l").read_bytes() == b"x"


# -- PyPI and npm installs -----------------------------------------------------------------


def wheel(name: str, version: str) -> tuple[str, bytes]:
    """A wheel built by hand: a console script that runs acpctl's demo agent."""
    files = {
        f"{name}/__init__.py": (
            "import os, sys\n"
            "def main():\n"
            f"    python = {sys.executable!r}\n"
            "    os.execv(python, [python, '-m', 'acpctl.demo_agent', *sys.argv[1:]])\n"
        ).encode(),
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ).encode(),
        f"{name}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{name}-{version}.dist-info/entry_points.txt": (
            f"[console_scripts]\n{name} = {name}:main\n"
        ).encode(),
    }
    record = [
        f"{path},sha256="
        + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        + f",{len(data)}"
        for path, data in files.items()
    ]
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for path, data in files.items():
            zipped.writestr(path, data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


@pytest.mark.e2e
def test_a_uvx_agent_installs_into_a_private_environment(
    home: Path, server: RegistryServer
) -> None:
    name = "scriptagent"
    filename, data = wheel(name, "1.0.0")
    server.routes[f"/files/{filename}"] = data
    digest = hashlib.sha256(data).hexdigest()
    link = f'<a href="/files/{filename}#sha256={digest}">{filename}</a>'
    server.routes[f"/simple/{name}/"] = f"<html><body>{link}</body></html>".encode()
    agent = {
        "id": AGENT_ID,
        "name": "Script Agent",
        "version": "1.0.0",
        "description": "a test agent",
        "distribution": {"uvx": {"package": f"{name}==1.0.0"}},
    }
    url = publish(server, agent)
    env = {
        **os.environ,
        "UV_INDEX_URL": server.url("/simple"),
        "UV_PYTHON": sys.executable,
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
    }
    cli_ok("agents", "update", "--from", url, env=env)
    out = cli_ok("agents", "install", AGENT_ID, "--yes", env=env)
    assert "uv pip install scriptagent==1.0.0" in out
    venv = home / "data" / "agents" / AGENT_ID / "1.0.0" / "venv"
    assert (venv / "bin" / name).is_file()
    assert "You said: hi" in cli_ok("run", "--agent", AGENT_ID, "hi", env=env)


@pytest.mark.npm
def test_a_real_npm_agent_installs_from_npm(home: Path, server: RegistryServer) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    agent = {
        "id": "pi-acp",
        "name": "pi ACP",
        "version": "0.0.24",
        "description": "ACP adapter for pi coding agent",
        "distribution": {"npx": {"package": "pi-acp@0.0.24"}},
    }
    cli_ok("agents", "update", "--from", publish(server, agent))
    out = cli_ok("agents", "install", "pi-acp", "--yes")
    assert "npm install pi-acp@0.0.24" in out
    record = listed("pi-acp")
    assert record["installed_from"] == "acpctl" and record["version"] == "0.0.24"
    executable = Path(record["command"][0])
    assert executable.parts[-3:] == ("node_modules", ".bin", "pi-acp")
    assert home / "data" / "agents" / "pi-acp" / "0.0.24" in executable.parents


@pytest.mark.e2e
def test_doctor_names_an_engines_mismatch(home: Path, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    package = tmp_path / "lib" / "node_modules" / "future-agent"
    package.mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps(
            {
                "name": "future-agent",
                "version": "3.0.0",
                "bin": {"future-agent": "cli.js"},
                "engines": {"node": ">=99.1.0"},
            }
        )
    )
    write_executable(package / "cli.js", "#!/bin/sh\nexit 1\n")
    cli_ok("agents", "add", "future", "--", str(package / "cli.js"))
    report = run_cli("doctor", "--agent", "future", "--json", timeout=60)
    findings = json.loads(report.stdout)
    engines = [f for f in findings if "needs node >=99.1.0" in f["message"]]
    assert engines and engines[0]["status"] == "problem"
    assert "future-agent 3.0.0" in engines[0]["message"] and "node here is" in engines[0]["message"]
    assert "acpctl agents install future --version" in engines[0]["fix"]


@pytest.mark.e2e
def test_doctor_says_once_that_an_unsupported_node_runs_an_agent_that_answers(
    home: Path, tmp_path: Path
) -> None:
    """Issue 45, 6: the line said "(seen here) (it starts anyway, unsupported)" and told to
    install another node for an agent that works."""
    package = tmp_path / "lib" / "node_modules" / "future-agent"
    package.mkdir(parents=True)
    manifest = {"name": "future-agent", "version": "3.0.0", "bin": {"future-agent": "cli.js"}}
    (package / "package.json").write_text(json.dumps({**manifest, "engines": {"node": ">=99"}}))
    write_executable(package / "cli.js", f"#!/bin/sh\nexec {sys.executable} -m acpctl.demo_agent\n")
    cli_ok("agents", "add", "future", "--", str(package / "cli.js"))
    report = run_cli("doctor", "--agent", "future", "--json", timeout=60)
    [engines] = [f for f in json.loads(report.stdout) if "needs node >=99" in f["message"]]
    assert engines["status"] == "warning"
    assert engines["message"].endswith(": unsupported, but it answers"), engines
    assert not engines["fix"]


def test_update_is_conditional_in_process(home: Path, server: RegistryServer) -> None:
    url = publish(server)
    assert registry.update(url).changed is True  # no agents, where the snapshot has 39
    assert registry.source()["etag"]
    again = registry.update(url)
    assert again.changed is False and [s for _, s in server.requests] == [200, 304]


@pytest.mark.parametrize(
    "members,problem",
    [
        ([(file_member("../x"), b"x")], "would land outside"),
        ([(link_member("a", "/etc/passwd"), b"")], "absolute path"),
        ([(link_member("a/b", "../../x"), b"")], "links outside"),
    ],
    ids=["dotdot", "absolute-link", "link-up"],
)
def test_tar_members_outside_are_refused(
    tmp_path: Path, members: list[tuple[Any, bytes]], problem: str
) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_gz(members))
    root = tmp_path / "out"
    root.mkdir()
    with pytest.raises(AcpctlError, match=problem):
        installer.extract_tar(archive, root)
    assert list(root.iterdir()) == [] and not (tmp_path / "x").exists()


@pytest.mark.npm
def test_pi_from_the_catalog_on_an_older_node_is_named_with_its_fix(home: Path) -> None:
    """The catalog's pi (1.6.0, `engines.node >=22.19.0`), installed for real: on node 20
    the install warns before the download, from npm's own word, that it fails on an older
    node (the corpus saw it), refuses off a terminal without --yes, and doctor names the
    cause, where pi itself prints a stack trace. (claude-agent-acp, which the corpus saw
    run on an older node, is said to be unsupported but running, and not asked again.)"""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed")
    from acpctl.agents import runtimes

    too_old = runtimes.newer("22.19.0", runtimes.node_version() or "0.0.0")
    if too_old:
        refused = cli("agents", "install", "pi")  # off a terminal, no --yes
        assert refused.returncode == 2, refused.stdout
        assert "fails to start on an older node (seen here)" in refused.stdout
        assert "install pi 1.6.0 anyway: pass --yes" in refused.stderr
        assert "npm install" not in refused.stdout  # nothing was downloaded
    out = cli_ok("agents", "install", "pi", "--yes")
    assert "npm install @earendil-works/pi-coding-agent@1.6.0" in out
    assert ("needs node >=22.19.0" in out) is bool(too_old)
    if not too_old:
        pytest.skip("this node is new enough for pi 1.6: nothing to report")
    warned = out.index("needs node >=22.19.0")
    assert warned < out.index("npm install"), out  # said before the download
    assert out.count("needs node >=22.19.0") == 1 and "acpctl agents install pi --version" in out
    report = run_cli("doctor", "--agent", "pi", "--json", timeout=90)
    assert report.returncode == 1
    findings = json.loads(report.stdout)
    engines = [f for f in findings if "needs node >=22.19.0" in f["message"]]
    assert engines and engines[0]["status"] == "problem"
    assert "@earendil-works/pi-coding-agent 1.6.0" in engines[0]["message"]


def zip_with_links(members: list[tuple[str, bytes, bool]]) -> bytes:
    """A zip of (name, data, is_symlink) members, links stored as zip tools store them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, data, is_link in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 if is_link else 0o100644) << 16
            zipped.writestr(info, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "members",
    [
        # a link to "." makes a later link's "../a" leave the directory
        [("x", b".", True), ("x/l", b"../a", True)],
        # a link made harmless-looking before another link changes what it resolves to
        [("l1", b"b/../x", True), ("b", b".", True), ("l1/evil", b"x", False)],
    ],
    ids=["link-through-dot", "link-changed-later"],
)
def test_zip_links_cannot_lead_outside(tmp_path: Path, members: list[Any]) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_with_links(members))
    root = tmp_path / "out"
    root.mkdir()
    with pytest.raises(AcpctlError, match=r"outside|over another member"):
        installer.extract_zip(archive, root)
    assert not (tmp_path / "a").exists() and not (tmp_path / "x").exists()


# The issue-30 cases: a link chain whose `..` the text resolves inside and the kernel
# outside, four levels up and one.
DEEP_ESCAPE = [
    ("d/e/f/x", b"../../..", True),
    ("w", b"d/e/f/x/../../../../sentinel/pwned-deep", True),
    ("w", b"payload", False),
]
SHALLOW_ESCAPE = [("x", b".", True), ("a", b"x/../ESCAPED", True), ("a", b"payload", False)]


# The attack repeats a member's name (a link, then a file through it): zipfile warns of it.
@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
@pytest.mark.parametrize("members", [DEEP_ESCAPE, SHALLOW_ESCAPE], ids=["deep", "shallow"])
def test_a_link_chain_cannot_write_outside_the_version_directory(
    tmp_path: Path, members: list[Any]
) -> None:
    nested = tmp_path / "agents" / "agent" / "1.0.0"
    nested.mkdir(parents=True)
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_with_links(members))
    with pytest.raises(AcpctlError, match=r"outside|twice|over another member"):
        installer.extract_zip(archive, nested)
    assert list(nested.iterdir()) == []
    written = [p for p in tmp_path.rglob("*") if p.name in ("pwned-deep", "ESCAPED")]
    assert written == []


def _tar_with_links(members: list[tuple[str, bytes, bool]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data, is_link in members:
            info = tarfile.TarInfo(name)
            if is_link:
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("members", [DEEP_ESCAPE, SHALLOW_ESCAPE], ids=["deep", "shallow"])
def test_the_same_chain_as_tar_gets_one_line(tmp_path: Path, members: list[Any]) -> None:
    root = tmp_path / "out"
    root.mkdir()
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar_with_links(members))
    with pytest.raises(AcpctlError, match="refused"):
        installer.extract_tar(archive, root)
    assert list(root.iterdir()) == []


def _chains(seed: int) -> list[tuple[str, bytes, bool]]:
    """Links in random order that point at each other with `..` and `.`, then files written
    through them: whatever the kernel makes of them must stay inside."""
    generator = random.Random(seed)
    names = ["a", "b/c", "d", "e/f/g", "h"]
    targets = [".", "..", "../..", "a", "b", "b/c/..", "d/../..", "e/f", "h/../x"]
    members = [
        (generator.choice(names), generator.choice(targets).encode(), True)
        for _ in range(generator.randint(1, 5))
    ]
    for _ in range(generator.randint(1, 3)):
        name = f"{generator.choice(names)}/{generator.choice(['..', '.', 'z'])}/out"
        members.append((name, b"payload", False))
    return members


@pytest.mark.filterwarnings("ignore:Duplicate name")  # names given twice are a case too
@pytest.mark.parametrize("seed", range(150))
def test_generated_link_chains_never_leave_the_root(tmp_path: Path, seed: int) -> None:
    members = _chains(seed)
    for kind, build in (("zip", zip_with_links), ("tar", _tar_with_links)):
        outside = tmp_path / kind
        root = outside / "deep" / "er" / "root"
        root.mkdir(parents=True)
        archive = tmp_path / f"a.{kind}"
        archive.write_bytes(build(members))
        extract = installer.extract_zip if kind == "zip" else installer.extract_tar
        try:
            extract(archive, root)
        except AcpctlError:
            assert list(root.iterdir()) == [], (kind, members)
        real_root = os.path.realpath(root)
        for path in outside.rglob("*"):
            real = os.path.realpath(path)
            if path.is_file() or path.is_symlink():
                assert os.path.commonpath([real, real_root]) == real_root, (kind, members, path)


# -- issue 30: downloads and documents ----------------------------------------------------


def test_only_https_and_loopback_http_are_fetched() -> None:
    from acpctl.agents import download

    download.check_url("https://example.org/a.zip")
    download.check_url("http://127.0.0.1:8000/a.zip")
    download.check_url("http://localhost/a.zip")
    download.check_url("http://[::1]/a.zip")
    for url in ("file:///etc/passwd", "http://example.org/a.zip", "ftp://x/a", "https:///x"):
        with pytest.raises(AcpctlError, match="only https URLs"):
            download.check_url(url)


@pytest.mark.e2e
def test_a_file_url_archive_is_not_read_from_disk(home: Path, server: RegistryServer) -> None:
    agent = binary_agent(server, "1.0.0", script("1.0.0"), "tool", "./tool", None)
    agent["distribution"]["binary"][catalog.platform_key()]["archive"] = "file:///etc/hostname"
    cli_ok("agents", "update", "--from", publish(server, agent))
    result = run_cli("agents", "install", AGENT_ID, "--yes")
    assert result.returncode == 1 and "only https URLs" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@contextlib.contextmanager
def trickling_server() -> Iterator[str]:
    """A server that sends one byte every 0.2 s, forever (each read succeeds)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while not stop.wait(0.2):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/slow"
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_a_trickling_download_ends_at_its_deadline(tmp_path: Path) -> None:
    from acpctl.agents import download

    with trickling_server() as url:
        begin = time.monotonic()
        response = download.open_url(url, timeout=1.0)
        with pytest.raises(AcpctlError, match="took too long"):
            response.read(1 << 20)
        assert time.monotonic() - begin < 10  # the deadline, not the 20,000 s of the body


def test_a_trickling_download_stops_below_the_minimum_rate(tmp_path: Path) -> None:
    """Issue 41: a server that trickled a byte every 29 s held an install for the whole
    10 minutes. Below the minimum rate over a window (30 s; 0.5 s here) it stops."""
    from acpctl.agents import download

    with trickling_server() as url:  # 5 bytes a second
        begin = time.monotonic()
        response = download.open_url(url, timeout=60, min_rate=100, rate_window_s=0.5)
        with pytest.raises(AcpctlError, match=r"below the minimum of 100 \(--min-rate\)"):
            response.read(1 << 20)
        assert time.monotonic() - begin < 5  # the window, not the 60 s deadline
        fast_enough = download.open_url(url, timeout=1.5, min_rate=1, rate_window_s=0.5)
        with pytest.raises(AcpctlError, match="took too long"):  # 5 B/s passes 1 B/s
            fast_enough.read(1 << 20)
    assert cli("agents", "install", "x", "--min-rate", "-1").returncode == 2


def test_a_trickling_registry_ends_at_update_s_timeout(home: Path) -> None:
    with trickling_server() as url:
        begin = time.monotonic()
        with pytest.raises(AcpctlError, match="took too long"):
            registry.update(url, timeout=1.0)
        assert time.monotonic() - begin < 10


def _bomb_zip(members: int, size: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        for n in range(members):
            zipped.writestr(f"m{n}", b"\0" * size)
    return buffer.getvalue()


def test_an_archive_that_unpacks_too_far_is_refused(tmp_path: Path) -> None:
    small = Limits(unpacked_bytes=1 << 20, members=50)
    cases = {
        "big.zip": (_bomb_zip(1, 4 << 20), "unpacks to more than 1 MiB"),
        "many.zip": (_bomb_zip(60, 1), "more than 50 members"),
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = 4 << 20
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    cases["big.tar.gz"] = (buffer.getvalue(), "unpacks to more than 1 MiB")
    for name, (data, problem) in cases.items():
        root = tmp_path / name / "out"
        root.mkdir(parents=True)
        archive = tmp_path / name / name
        archive.write_bytes(data)
        extract = installer.extract_zip if name.endswith(".zip") else installer.extract_tar
        with pytest.raises(AcpctlError, match=problem):
            extract(archive, root, small)
        assert list(root.iterdir()) == []
    extract_ok = tmp_path / "ok"
    extract_ok.mkdir()
    (tmp_path / "ok.zip").write_bytes(_bomb_zip(3, 10))
    installer.extract_zip(tmp_path / "ok.zip", extract_ok, small)
    assert sorted(p.name for p in extract_ok.iterdir()) == ["m0", "m1", "m2"]


@pytest.mark.e2e
def test_install_names_the_flag_that_raises_a_limit(home: Path, server: RegistryServer) -> None:
    archive = _bomb_zip(1, 3 << 20)
    url = publish(server, binary_agent(server, "1.0.0", archive, "big.zip", "./m0", None))
    cli_ok("agents", "update", "--from", url)
    refused = run_cli("agents", "install", AGENT_ID, "--yes", "--max-unpacked", "1")
    assert refused.returncode == 1 and "--max-unpacked raises the limit" in refused.stderr


def npx_agent(**fields: Any) -> dict[str, Any]:
    """A registry entry for an npm package, with `fields` changed."""
    return {
        "id": AGENT_ID,
        "name": "Script Agent",
        "version": "1.0.0",
        "description": "a test agent",
        "distribution": {"npx": {"package": "x@1.0.0"}},
        **fields,
    }


@pytest.mark.parametrize(
    "agents,problem",
    [
        ("deep", "nested too deeply"),
        ("twice", "'script-agent' twice"),
        ("version", "has version '1.0.0/../../x'"),
        ("newline", "agent id 'script-agent"),
    ],
)
def test_registry_documents_acpctl_cannot_trust_are_refused(
    home: Path, tmp_path: Path, agents: str, problem: str
) -> None:
    agent = npx_agent()
    path = tmp_path / "registry.json"
    if agents == "deep":
        path.write_text('{"agents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif agents == "twice":
        path.write_bytes(document(agent, {**agent, "name": "Another"}))
    elif agents == "newline":  # the schema's `$` lets a final newline through
        path.write_bytes(document({**agent, "id": AGENT_ID + "\n"}))
    else:
        path.write_bytes(document({**agent, "version": "1.0.0/../../x"}))
    with pytest.raises(AcpctlError, match=problem):
        registry.update(str(path))
    assert not (home / "data" / "registry" / "registry.json").exists()


def test_escapes_in_registry_text_never_reach_the_terminal(home: Path, tmp_path: Path) -> None:
    agent = npx_agent(name="Evil\x1b]0;owned\x07 \x1b[2J\u009b31m", description="desc\x1b[31m red")
    path = tmp_path / "registry.json"
    path.write_bytes(document(agent))
    assert cli("agents", "update", "--from", str(path)).returncode == 0
    catalog.entries.cache_clear()
    try:
        shown = cli("agents", "show", AGENT_ID)
        listed_ = cli("agents", "list")
    finally:
        catalog.entries.cache_clear()
    for output in (shown.stdout, listed_.stdout):
        assert "\x1b" not in output and "\x07" not in output and "\u009b" not in output
    assert "Evil\\x1b]0;owned\\x07" in shown.stdout


def test_an_older_node_is_told_apart_from_what_the_corpus_saw() -> None:
    """Issue 31, 6: unsupported-but-runs (claude-agent-acp on node 20) is not "it fails"
    (pi 1.6 on node 20); what nobody has seen "may not start"."""
    from acpctl.agents import catalog, runtimes

    problem = runtimes.EnginesProblem("pkg", "1.0.0", ">=22", "20.20.2")
    assert catalog.lookup("claude") is not None and catalog.lookup("pi") is not None
    runs = problem.verdict(catalog.lookup("claude").older_node)  # type: ignore[union-attr]
    fails = problem.verdict(catalog.lookup("pi").older_node)  # type: ignore[union-attr]
    assert runs == "unsupported, but it starts and answers on an older node (seen here)"
    assert fails == "it fails to start on an older node (seen here)"
    assert problem.verdict(None) == "it may not start"
    assert (
        runtimes.EnginesProblem("pkg", "1.0.0", ">=22", None)
        .verdict("runs")
        .endswith("without node")
    )


FAKE_NPM = """#!/bin/sh
# npm view, as the npm registry answers it: pi-acp has no 0.0.32 (its newest is 0.0.34),
# and there is no @opencode/cli at all; everything else is found.
case "$2" in
  pi-acp@0.0.32|@opencode/cli*)
    echo '{"error": {"code": "E404", "summary": "Not Found"}}'; exit 1 ;;
  pi-acp) echo '"0.0.34"' ;;
  *) echo '{"version": "1.0.0", "engines": {"node": ">=18"}}' ;;
esac
"""


@pytest.mark.e2e
def test_a_release_npm_does_not_have_is_said_in_one_line_and_doctor_flags_it(
    home: Path, tmp_path: Path
) -> None:
    """Issue 31, 7: the registry names pi-acp 0.0.32 (npm has 0.0.34 at most) and
    @opencode/cli (npm has no such package): the install says so in one line, before any
    download, with what to install instead; `doctor --catalog` flags both. A stand-in npm
    on PATH answers as the npm registry did here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "npm", FAKE_NPM)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    refused = cli("agents", "install", "pi-acp", "--yes", env=env)
    assert refused.returncode == 1
    assert "npm has no pi-acp 0.0.32, the release the registry names (its newest is 0.0.34)" in (
        refused.stderr
    )
    assert "acpctl agents install pi-acp --version 0.0.34 (or --version latest)" in refused.stderr
    missing = cli("agents", "install", "opencode", "--via", "npx", "--yes", env=env)
    assert "npm has no package @opencode/cli" in missing.stderr, missing.stderr
    report = cli("doctor", "--catalog", "--json", env=env)
    flagged = {
        f["check"]: f for f in json.loads(report.stdout) if f["check"].startswith("catalog ")
    }
    assert set(flagged) == {"catalog pi-acp", "catalog opencode"}, flagged
    assert flagged["catalog pi-acp"]["fix"] == "acpctl agents install pi-acp --version 0.0.34"

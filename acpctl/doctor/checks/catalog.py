"""The doctor's check of the catalog itself (`acpctl doctor --catalog`): every npm package
the registry names for an agent, at the version it pins, asked of the npm registry. A
release npm does not have (the registry ran ahead of or behind npm) cannot be installed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from acpctl.agents import installer, runtimes
from acpctl.agents.catalog import entries
from acpctl.doctor.findings import Finding, ok

WORKERS = 8


def check_catalog() -> list[Finding]:
    pinned = []
    for entry in entries().values():
        npm = entry.distributions.get("npx")
        if npm is not None and npm.package and entry.version:
            pinned.append((entry, installer.package_name(npm.package), entry.version))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        releases = list(pool.map(lambda item: runtimes.npm_release(item[1], item[2]), pinned))
    findings = []
    unknown = 0
    for (entry, package, version), release in zip(pinned, releases, strict=True):
        check = f"catalog {entry.name}"
        if release is None:
            unknown += 1
        elif not release.found and release.latest is not None:
            findings.append(
                Finding(
                    check,
                    "problem",
                    f"the registry names {package} {version}, which npm does not have "
                    f"(its newest is {release.latest}): it cannot be installed as named",
                    f"acpctl agents install {entry.name} --version {release.latest}",
                )
            )
        elif not release.found:
            findings.append(
                Finding(
                    check,
                    "problem",
                    f"the registry names the npm package {package}, which npm does not have",
                    f"{entry.name} cannot be installed from npm; `acpctl agents update` may "
                    "bring a fixed registry",
                )
            )
    asked = len(pinned) - unknown
    if unknown == len(pinned) and pinned:
        findings.append(
            Finding("catalog", "warning", "npm could not be asked (offline, or no npm)")
        )
    elif not findings:
        findings.append(ok("catalog", f"npm has every release the registry names ({asked})"))
    return findings

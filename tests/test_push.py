"""Issue 52, 1: Web Push. A paired device's page subscribes; when a question has waited, the
host pushes it to the device's push service, signed with its VAPID key and encrypted to the
device (RFC 8291), and the notification's one-time answers reach the agent. Offline here,
chromium's PushManager.subscribe() never settles, so the test makes the subscription (a
P-256 key pair and an auth secret) and points it at an https push-service stand-in on
127.0.0.1, which config.toml allows. What the stand-in gets is checked (the signature, the
audience) and decrypted with the test's key; that plaintext is handed to the page's
service worker by CDP (ServiceWorker.deliverPushMessage), and a notificationclick built by
a script answers from it (no browser command taps a notification)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.push import PublicResolver, checked_subscription, endpoint_problem
from tests.conftest import cli, run

ALLOWED = ("127.0.0.1/32",)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# == what the host will and will not push to (no process) ==================================


def test_a_subscription_needs_https_and_a_public_address_unless_allowed() -> None:
    keys = {"p256dh": "BKey", "auth": "auth"}
    good = {"endpoint": "https://push.example.com/send/abc", "keys": keys, "extra": 1}
    assert checked_subscription(good, ()) == {"endpoint": good["endpoint"], "keys": keys}
    for endpoint in (
        "http://push.example.com/x",  # not https
        "https://127.0.0.1:8443/x",  # loopback
        "https://10.1.2.3/x",  # a private network
        "https://[::1]/x",
        "https://169.254.169.254/latest/meta-data",  # a cloud's metadata service
        "file:///etc/passwd",
    ):
        with pytest.raises(AcpctlError):
            checked_subscription({"endpoint": endpoint, "keys": keys}, ())
    assert endpoint_problem("https://127.0.0.1:8443/x", ALLOWED) is None  # the stand-in
    with pytest.raises(AcpctlError, match="keys"):
        checked_subscription({"endpoint": good["endpoint"], "keys": {"p256dh": "x"}}, ())
    with pytest.raises(AcpctlError):
        checked_subscription("https://push.example.com", ())


def test_a_name_that_resolves_to_loopback_is_not_connected_to() -> None:
    """A name is checked as it connects: one that resolves to a private address (now, or
    only after the subscription was checked: DNS rebinding) gets no push."""

    async def scenario() -> None:
        refusing = PublicResolver(())
        with pytest.raises(OSError, match="no public address"):
            await refusing.resolve("localhost", 443)
        await refusing.close()
        allowing = PublicResolver(ALLOWED)
        found = await allowing.resolve("localhost", 443)
        assert {entry["host"] for entry in found} == {"127.0.0.1"}
        await allowing.close()

    run(scenario())


# == a push service stand-in ================================================================


@dataclass
class PushService:
    """An https push service on 127.0.0.1: what it got, and the status it answers."""

    base: str = ""
    got: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    status: int = 201
    arrived: threading.Event = field(default_factory=threading.Event)


@contextmanager
def push_service(tmp_path: Path) -> Iterator[tuple[PushService, Path]]:
    import ssl

    from tests.test_host import self_signed

    cert, key = self_signed(tmp_path, "-push")
    service = PushService()
    ready = threading.Event()
    stop: list[asyncio.AbstractEventLoop] = []

    async def receive(request: web.Request) -> web.Response:
        headers = {name.lower(): value for name, value in request.headers.items()}
        service.got.append((request.path, headers, await request.read()))
        service.arrived.set()
        return web.Response(status=service.status)

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/send/{id}", receive)
        runner = web.AppRunner(app)
        await runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        service.base = f"https://127.0.0.1:{port}"
        stop.append(asyncio.get_running_loop())
        ready.set()
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(_until_stopped(serve())), daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield service, cert
    finally:
        loop = stop[0]
        for task in asyncio.all_tasks(loop):
            loop.call_soon_threadsafe(task.cancel)
        thread.join(10)


async def _until_stopped(serving: Any) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await serving


@dataclass
class DeviceKeys:
    """What a browser makes when it subscribes: a P-256 key pair and an auth secret."""

    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: secrets.token_bytes(16))

    def subscription(self, endpoint: str) -> dict[str, Any]:
        point = self.private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {"endpoint": endpoint, "keys": {"p256dh": b64url(point), "auth": b64url(self.auth)}}

    def decrypt(self, body: bytes) -> bytes:
        import http_ece

        decrypted: bytes = http_ece.decrypt(
            body, private_key=self.private, auth_secret=self.auth, version="aes128gcm"
        )
        return decrypted


def verified_vapid(headers: dict[str, str], audience: str) -> dict[str, Any]:
    """The push's VAPID claims, once its signature checks out with the key it names."""
    scheme, _, said = headers["authorization"].partition(" ")
    assert scheme == "vapid", headers["authorization"]
    parts = dict(part.strip().split("=", 1) for part in said.split(","))
    token, public = parts["t"], unb64url(parts["k"])
    head, claims, signature = token.split(".")
    raw = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), public)
    key.verify(der, f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if forged
    decoded: dict[str, Any] = json.loads(unb64url(claims))
    assert decoded["aud"] == audience and decoded["exp"] > time.time()
    assert json.loads(unb64url(head))["alg"] == "ES256"
    return decoded


def push_config(home: Path, *extra: str) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "[serve]\non_waiting_after_s = 0.2\npush_allow_addresses = ['127.0.0.1/32']\n"
        + "".join(f"{line}\n" for line in extra)
    )


def listed_devices() -> list[dict[str, Any]]:
    """`acpctl host devices --json`, in a thread of its own: the CLI runs an event loop,
    which the browser's driver has in this one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as thread:
        shown = thread.submit(cli, "serve", "--devices", "--json").result()
    listed: list[dict[str, Any]] = json.loads(shown.stdout)
    return listed


def wait_for(check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)
    return found


# == the host's pushes, with no browser ====================================================


@pytest.mark.e2e
@pytest.mark.parametrize("agent_text", [True, False], ids=["with-text", "no-agent-text"])
def test_a_waiting_question_is_pushed_signed_and_encrypted_and_a_gone_one_dropped(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, agent_text: bool
) -> None:
    from tests.test_host import LISTENING, serving
    from tests.test_pairing import EditorsTurn, Page, device_socket, paired, paired_address

    with push_service(tmp_path) as (service, cert):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the host trusts the stand-in
        push_config(home, f"push_agent_text = {'true' if agent_text else 'false'}")
        args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
        with serving(monkeypatch, *args, until=LISTENING) as (_, found, _state):
            page = Page(found.group(1).decode().replace("ws://", "http://").removesuffix("/acp"))
            _, code = paired_address("--name", "phone")
            device = DeviceKeys()
            endpoint = f"{service.base}/send/phone1"

            async def subscribe() -> dict[str, Any]:
                async with aiohttp.ClientSession() as http:
                    credential, key = await paired(http, page, code)
                async with device_socket(page, credential, key) as phone:
                    public = await phone.request(acp.HOST_PUSH_KEY, {})
                    refused = await phone.request(
                        acp.HOST_PUSH_SUBSCRIBE,
                        {"subscription": device.subscription("https://10.0.0.1/send/x")},
                    )
                    assert refused["error"]["code"] == acp.INVALID_PARAMS, refused
                    kept = await phone.request(
                        acp.HOST_PUSH_SUBSCRIBE, {"subscription": device.subscription(endpoint)}
                    )
                    assert kept["result"]["subscribed"] is True, kept
                    result: dict[str, Any] = {**public["result"], "secrets": (credential, key)}
                    return result

            public = run(subscribe())
            assert public["subscribed"] is False and len(unb64url(public["publicKey"])) == 65
            (listed,) = json.loads(cli("serve", "--devices", "--json").stdout)
            assert listed["push"] is True

            turn = EditorsTurn(page, "edit", {}, answers=True)
            turn.thread.start()
            try:
                assert service.arrived.wait(30), "no push came"
                path, headers, body = service.got[0]
                assert path == "/send/phone1"
                claims = verified_vapid(headers, service.base)
                assert claims["sub"] == "mailto:acpctl@localhost"
                assert unb64url(headers["authorization"].split("k=")[1]) == unb64url(
                    public["publicKey"]
                )
                assert headers["content-encoding"] == "aes128gcm" and int(headers["ttl"]) > 0
                assert b"Edit" not in body  # the push service reads nothing
                said = json.loads(device.decrypt(body))
                assert said["agent"] == "demo" and said["question"]
                if agent_text:
                    assert said["title"] == "demo asks in tmp"
                    assert said["body"] == "Edit /tmp/demo.txt"
                    assert [a["action"] for a in said["actions"]] == ["allow", "reject"]
                    assert said["url"].startswith("/#agent=demo&session=")
                else:
                    assert set(said) == {"question", "agent", "tag"}
                    # The service worker fetches the rest, as the device: both secrets.
                    fetched = run(fetch_question(page, public["secrets"], said["question"]))
                    assert fetched[0] == 200 and fetched[1]["body"] == "Edit /tmp/demo.txt"
                    without_key = run(
                        fetch_question(page, (public["secrets"][0], ""), said["question"])
                    )
                    assert without_key[0] == 401  # the cookie alone is no device
            finally:
                turn.go.set()
                turn.thread.join(60)
            assert turn.seen["stop"] == "end_turn"

            # The push service says the subscription is gone: the host drops it.
            service.status = 410
            service.arrived.clear()
            again = EditorsTurn(page, "edit", {}, answers=True)
            again.thread.start()
            try:
                assert service.arrived.wait(30)
                wait_for(
                    lambda: not json.loads(cli("serve", "--devices", "--json").stdout)[0]["push"]
                )
            finally:
                again.go.set()
                again.thread.join(60)


async def fetch_question(page: Any, secrets: tuple[str, str], question: str) -> tuple[int, Any]:
    """POST /push/question as the service worker makes it: the device's cookie, its key."""
    from tests.test_pairing import COOKIE

    cookie, key = secrets
    headers = {"Cookie": f"{COOKIE}={cookie}", "Origin": page.base, acp.DEVICE_KEY_HEADER: key}
    async with (
        aiohttp.ClientSession() as http,
        http.post(page.url("/push/question"), json={"question": question}, headers=headers) as got,
    ):
        return got.status, await got.json()


def test_a_notification_carries_one_time_answers_only() -> None:
    """A standing permission ("always") is chosen on the page, where it is shown for what it
    is: the notification's buttons are the first one-time allow and the first one-time
    reject the agent offered."""
    from acpctl.host.notify import Pushed, push_payload
    from acpctl.runner.idmap import ReverseRequest

    options = [
        {"optionId": "always", "name": "Always allow", "kind": acp.ALLOW_ALWAYS},
        {"optionId": "yes", "name": "Allow", "kind": acp.ALLOW_ONCE},
        {"optionId": "never", "name": "Never", "kind": "reject_always"},
        {"optionId": "no", "name": "Reject", "kind": acp.REJECT_ONCE},
    ]

    class Meta:
        title, cwd = "Fix it", "/home/ada/app"

    class Record:
        id, meta = "s1", Meta()

    message = {
        "method": acp.REQUEST_PERMISSION,
        "params": {"toolCall": {"title": "Bash"}, "options": options},
    }
    request = ReverseRequest(1, 0, Record(), acp.REQUEST_PERMISSION, message)
    said = push_payload("q1", Pushed(None, "claude", 7, 100.0), request)  # type: ignore[arg-type]
    assert said["actions"] == [
        {"action": "yes", "title": "Allow"},
        {"action": "no", "title": "Reject"},
    ]
    assert said["title"] == "claude asks in app" and said["body"] == "Bash"
    assert said["url"] == "/#agent=claude&session=s1"


# == the whole way, in the browser ==========================================================

SUBSCRIPTION_STAND_IN = """
    const made = %s;
    PushManager.prototype.getSubscription = async function () { return null; };
    PushManager.prototype.subscribe = async function () {
        return { endpoint: made.endpoint, toJSON: () => made, unsubscribe: async () => true };
    };
"""

NOTIFICATIONS = """async () => {
    const worker = await navigator.serviceWorker.ready;
    return (await worker.getNotifications()).map(
        (n) => ({ title: n.title, body: n.body, actions: n.actions.map((a) => a.action) }));
}"""

ANSWER = """async ([question, optionId]) => {
    const { deviceKey } = await import("/assets/device-key.js");
    const answer = await fetch("/push/answer", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Acpctl-Device-Key": await deviceKey() },
        body: JSON.stringify({ question, optionId }),
    });
    return [answer.status, await answer.json()];
}"""


def unauthenticated_answer(url: str, question: str) -> int:
    """A POST of an answer with neither of the device's secrets: its status."""
    import urllib.error
    import urllib.request

    sent = urllib.request.Request(
        url,
        data=json.dumps({"question": question, "optionId": "allow"}).encode(),
        headers={"Origin": url.split("/push/")[0], "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


TAP = """async (action) => {
    const shown = await self.registration.getNotifications();
    const notification = shown.find((n) => n.actions.length > 0);
    self.dispatchEvent(new NotificationEvent("notificationclick", { notification, action }));
    return notification.title;
}"""


@pytest.mark.e2e
def test_a_push_reaches_the_service_worker_and_its_notification_answers_the_agent(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    from tests.test_host import LISTENING, serving
    from tests.test_pairing import BROWSER_ARGS, EditorsTurn, Page, chromium, paired_address

    with push_service(tmp_path) as (service, cert):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        push_config(home)
        args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
        with serving(monkeypatch, *args, until=LISTENING) as (_, found, _state):
            page = Page(found.group(1).decode().replace("ws://", "http://").removesuffix("/acp"))
            address, _ = paired_address("--name", "phone")
            device = DeviceKeys()
            made = device.subscription(f"{service.base}/send/browser")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
                try:
                    context = browser.new_context(viewport={"width": 390, "height": 844})
                    context.grant_permissions(["notifications"], origin=page.base)
                    context.add_init_script(SUBSCRIPTION_STAND_IN % json.dumps(made))
                    tab = context.new_page()
                    cdp = context.new_cdp_session(tab)
                    registrations: list[str] = []
                    cdp.on(
                        "ServiceWorker.workerRegistrationUpdated",
                        lambda event: registrations.extend(
                            r["registrationId"] for r in event["registrations"]
                        ),
                    )
                    cdp.send("ServiceWorker.enable")
                    tab.goto(address)
                    tab.wait_for_selector("#notify:not([hidden])")
                    assert tab.inner_text("#notify") == "Tell me when something waits"
                    tab.click("#notify")
                    tab.wait_for_selector("#notify:has-text('Stop telling me')")
                    (listed,) = listed_devices()
                    assert listed["push"] is True
                    # The service worker registered at http://127.0.0.1 (a secure context).
                    wait_for(lambda: registrations and context.service_workers)
                    (worker,) = context.service_workers
                    assert worker.url == page.url("/sw.js")

                    turn = EditorsTurn(page, "edit", {})
                    turn.thread.start()
                    assert service.arrived.wait(30), "no push came"
                    _, headers, body = service.got[0]
                    verified_vapid(headers, service.base)
                    plaintext = device.decrypt(body).decode()
                    cdp.send(
                        "ServiceWorker.deliverPushMessage",
                        {
                            "origin": page.base,
                            "registrationId": registrations[-1],
                            "data": plaintext,
                        },
                    )
                    shown = wait_for(
                        lambda: [n for n in tab.evaluate(NOTIFICATIONS) if n["actions"]]
                    )
                    assert shown == [
                        {
                            "title": "demo asks in tmp",
                            "body": "Edit /tmp/demo.txt",
                            "actions": ["allow", "reject"],
                        }
                    ]
                    # Only an option the notification offers: never a standing one.
                    question = json.loads(plaintext)["question"]
                    status, said = tab.evaluate(ANSWER, [question, "always"])
                    assert status == 400 and "one-time" in said["error"]
                    assert worker.evaluate(TAP, "allow") == "demo asks in tmp"
                    turn.thread.join(60)
                    assert turn.seen["stop"] == "end_turn" and turn.seen["withdrawn"]
                    (told,) = turn.seen["told"]
                    assert told["resolvedBy"]["device"] == "phone"
                    assert told["resolvedBy"]["via"] == "notification"

                    # The same tap again: told it was answered already; nothing changes.
                    status, said = tab.evaluate(ANSWER, [question, "allow"])
                    assert status == 409 and "already answered" in said["error"]
                    # Without the device's secrets: not even told that.
                    assert unauthenticated_answer(page.url("/push/answer"), question) == 401
                finally:
                    browser.close()
            shown_history = cli("sessions", "show", turn.seen["session"]).stdout
            assert "by phone (a paired device), from a notification" in shown_history

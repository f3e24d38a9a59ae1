"""ACP v1 wire names in one table: methods, update kinds, stop reasons, error codes; and
what acpctl does with every method and update kind the schema defines (METHODS, UPDATES),
with the places in each message where an id of one hop must be mapped to the other's.

Everything else refers to these constants; no module spells a wire name itself.
tests/test_protocol_table.py fails when a newer schema defines a method or update kind
that this table does not cover, or puts an id somewhere the table does not map.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from acpctl.jsonrpc.messages import (
    INTERNAL_ERROR as INTERNAL_ERROR,
)
from acpctl.jsonrpc.messages import (
    INVALID_PARAMS as INVALID_PARAMS,
)
from acpctl.jsonrpc.messages import (
    INVALID_REQUEST as INVALID_REQUEST,
)
from acpctl.jsonrpc.messages import (
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
)
from acpctl.jsonrpc.messages import (
    PARSE_ERROR as PARSE_ERROR,
)

# The highest protocol version acpctl's own handlers implement.
PROTOCOL_VERSION = 1

# Client -> agent
INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
LOGOUT = "logout"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_LIST = "session/list"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
# unstable (schema.unstable.json)
SESSION_FORK = "session/fork"
SESSION_STATUS = "session/status"
SESSION_SET_TITLE = "session/set_title"
SESSION_ARCHIVE = "session/archive"
SESSION_UNARCHIVE = "session/unarchive"
SESSION_SET_MODEL = "session/set_model"
AUTH_STATUS = "auth/status"
PROVIDERS_LIST = "providers/list"
PROVIDERS_SET = "providers/set"
PROVIDERS_DISABLE = "providers/disable"
PROXY_INITIALIZE = "proxy/initialize"
PROXY_SUCCESSOR = "proxy/successor"

# Agent -> client
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
FS_READ_TEXT_FILE = "fs/read_text_file"
FS_WRITE_TEXT_FILE = "fs/write_text_file"
TERMINAL_CREATE = "terminal/create"
TERMINAL_OUTPUT = "terminal/output"
TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit"
TERMINAL_KILL = "terminal/kill"
TERMINAL_RELEASE = "terminal/release"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"
AUTH_STATUS_UPDATE = "auth/status_update"
MCP_MESSAGE = "mcp/message"  # either direction (unstable)

# Either direction
CANCEL_REQUEST = "$/cancel_request"

# Several clients on one session (the multi-client attach proposal), served by the host
SESSION_ATTACH = "session/attach"
SESSION_DETACH = "session/detach"
CONTROLLER = "controller"
OBSERVER = "observer"
PERMISSION_RESOLVED = "permission_resolved"  # session/update kinds acpctl sends itself
CLIENT_DISCONNECTED = "client_disconnected"
# The session host's unix socket: the first line of a connection (acpctl's own extension)
HOST_CONNECT = "_acpctl/connect"
HOST_STATUS = "_acpctl/status"
HOST_LOG = "_acpctl/log"  # the agent's log lines, to a client that asked (run --acp's stderr)
# To every client when the host is told to stop: {"signal", "graceSeconds"}: running turns
# get that long to finish, then the host cancels them and closes every connection.
HOST_STOPPING = "_acpctl/stopping"
# From the link (run --acp for a remote agent) to an editor that asked for it with
# `_meta: {"acpctl/linkState": true}` in its initialize's clientCapabilities (acpctl's own
# terminal client does): {"state": "down", "since": epoch seconds, "reason"} when the link
# drops, {"state": "up", "after": seconds, "how"} when it is back.
LINK_STATE = "_acpctl/link"
LINK_STATE_META = "acpctl/linkState"
# A person's answers, recorded in a session's history (who asked what, who answered how):
# a replay sends each as {"sessionId", "event"} (the stored event: permission,
# permission_outcome, elicitation, elicitation_outcome) to a client that asked with
# `_meta: {"acpctl/recorded": true}` in its initialize's clientCapabilities (acpctl's own
# terminal client does).
RECORDED_NOTE = "_acpctl/recorded"
# In a replay to a client that asked for the recorded answers: when a prompt was sent
# (epoch seconds), in its session/update's params' _meta.
AT_META = "acpctl/at"
RECORDED_META = "acpctl/recorded"
RECORDED_EVENTS = frozenset(
    {"permission", "permission_outcome", "elicitation", "elicitation_outcome"}
)
# To a session's other clients when one answers the agent's elicitation: {"sessionId",
# "elicitationId"?, "toolCallId"?, "action", "resolvedBy"} (as permission_resolved says it
# of a permission; the attach proposal has no update kind for elicitations).
ELICITATION_RESOLVED = "_acpctl/elicitation_resolved"
# And of a permission, to the clients that did not attach (permission_resolved's fields):
# an ACP v1 editor would refuse the proposal's update kind; it ignores an extension.
PERMISSION_ANSWERED = "_acpctl/permission_resolved"
# The unix socket's first line from `acpctl host pair` ({"role", "name"}: a one-time
# pairing code for a device), `--devices` and `--revoke` ({"name"}: the device unpaired and
# its connections ended).
HOST_PAIR = "_acpctl/pair"
# A client of the session host may ask these of any agent's connection; the host answers,
# across all its agents (read-only: an observer may ask too). docs/web.md.
# {"waiting": [...]}: every question for a person still unanswered, where and since when.
HOST_WAITING = "_acpctl/waiting"
# {"sessions": [...]}: the sessions live at the host, each running, waiting or idle; then
# the history's recent others ("live": false).
HOST_SESSIONS = "_acpctl/sessions"
# {"agents": [...], "projects": [...]}: what a new session may be started with: the agents
# the history and the host know (the default first), the projects the history knows.
HOST_PROJECTS = "_acpctl/projects"
# {"devices": [{"name", "role", "paired", "lastSeen"}]}: the paired devices, asked by
# `acpctl host devices` on the unix socket, and by the page on any agent's connection.
HOST_DEVICES = "_acpctl/devices"
HOST_REVOKE = "_acpctl/revoke"
# The unix socket's first line from `acpctl host rotate-token`: {"role"} gets a new
# token, and the connections that came in with the old one are ended.
HOST_ROTATE_TOKEN = "_acpctl/rotate_token"
# `acpctl host stop` ({"now"?: true}): the host stops as on SIGTERM (running turns get the
# stop grace; `now`: cancelled at once); it answers {"pid", "runningTurns"} first.
HOST_STOP = "_acpctl/stop"


def stopping_notice(params: Any) -> str:
    """What a client says when the host tells it that it stops (HOST_STOPPING)."""
    params = params if isinstance(params, dict) else {}
    grace = params.get("graceSeconds")
    why = f" ({params['signal']})" if isinstance(params.get("signal"), str) else ""
    if isinstance(grace, (int, float)) and grace > 0:
        return f"the session host is stopping{why}: running turns get {grace:g} s to finish"
    return f"the session host is stopping{why}"


# A line client of the host (run --acp for a remote agent, over ssh) that leaves on purpose
# says so before it closes: any other end is a drop, held for a resume.
HOST_LEAVE = "_acpctl/leave"
# A WebSocket subprotocol of acpctl's own, which its link offers and the host accepts: the
# host's frames then carry several messages a frame, a line each (a raw newline never
# occurs in JSON text), instead of one. Others get one message a frame, as the transport
# says.
WEBSOCKET_LINES = "acpctl.lines"
# The host's page offers its own subprotocol, with a second one that carries its device's
# key (host/devices.py: a browser's WebSocket can set no header); the host picks the first.
# An HTTP request from the page (its service worker's) carries the key in a header.
WEBSOCKET_PAGE = "acpctl.page"
# The resumable-delivery draft's advertisement, in a v1 initialize answer: v1 has no
# `capabilities` (that is v2's name), and puts additions in _meta. In a v2 answer it is
# `capabilities.transport`, as the draft says.
TRANSPORT_META = "acpctl/transport"
# The agent's requests that are questions for a person: asked only of the clients that can
# answer them (runner/questions.py), recorded with their answers, listed as waiting.
QUESTIONS = frozenset({REQUEST_PERMISSION, ELICITATION_CREATE})
# The session host tells the clients that ask (clientCapabilities._meta["acpctl/changes"],
# its page does) that the questions waiting for a person changed: one asked, one settled.
# They ask for the list again then, instead of waiting for their next look.
CHANGES_META = "acpctl/changes"
WAITING_CHANGED = "_acpctl/waiting_changed"
# To the same clients when the host's sessions change (one opened, a turn begun or ended,
# a title given): the page asks for HOST_SESSIONS again then, and never polls it.
SESSIONS_CHANGED = "_acpctl/sessions_changed"
# The page's Web Push subscription (host/push.py): the host's VAPID public key, and the
# device's subscription set ({"subscription": PushSubscription.toJSON()}) or dropped (null).
HOST_PUSH_KEY = "_acpctl/push_key"
# A linked host's connection (host/linked_hosts.py) says so in its initialize
# (clientCapabilities._meta["acpctl/linked"]): what it is told of waiting questions and
# sessions is the host's own, never what the host sees through its own links (links are
# not transitive). Its asks of HOST_WAITING and HOST_SESSIONS say {"own": true} too.
LINKED_META = "acpctl/linked"
# {"question", "optionId", "by"?, "device"?, "host"?}: a waiting question
# answered (a permission's option) by a client that is not asked it on a connection: a
# linked host's page. With "host", the host forwards it to that linked host, which
# records it "by DEVICE, through THIS HOST". A controller's only.
HOST_ANSWER = "_acpctl/answer"
# {"words", "agent"?, "cwd"?, "since"?, "limit"?}: {"matches": [...]}, the host's history
# searched as `sessions search --json` prints it (a linked host's `sessions search --host`).
HOST_SEARCH = "_acpctl/search"
# The unix socket's first line from `acpctl host link add|remove`: config.toml's links read
# again, and watched as they are now; {"watching": [names]}.
HOST_RELINK = "_acpctl/relink"
# A linked host the watch has not reached yet (its `problem` in HOST_SESSIONS): a list asks
# that one itself, within its own deadline, rather than say nothing of it.
NOT_CONNECTED_YET = "not connected yet"
HOST_PUSH_SUBSCRIBE = "_acpctl/push_subscribe"
# In a prompt's answer acpctl gave for an agent that did not end a cancelled turn: why.
ENDED_BY_ACPCTL_META = "acpctl/endedByAcpctl"
WEBSOCKET_DEVICE_KEY = "acpctl.key."
DEVICE_KEY_HEADER = "Acpctl-Device-Key"
# The resumable-delivery draft's control messages (host/connection.py).
STREAM_RESUME = "stream/resume"
STREAM_RESUME_FAILED = "stream/resume_failed"
CURSOR_META = "acp/cursor"
# Streamable HTTP: the methods whose POST names its session in Acp-Session-Id (the SDKs' list)
SESSION_SCOPED_METHODS = frozenset(
    {
        SESSION_SET_MODE,
        SESSION_SET_CONFIG_OPTION,
        SESSION_PROMPT,
        SESSION_CANCEL,
        SESSION_CLOSE,
    }
)
TURN_STATE_META = "acp/turnState"
HOST_VERSION_META = "acpctl/version"  # in the host's initialize answer
HOST_STORE_META = "acpctl/store"  # and which store it records in (SessionStore.identity)
# and the connection's id, for a client that cannot read the upgrade's Acp-Connection-Id
# header (a browser's WebSocket): what its stream/resume names
CONNECTION_ID_META = "acpctl/connectionId"
# and the role its token or device has there ("controller" or "observer"): a page shows
# an observer no control it would be refused; and the paired device's name, if it is one
ROLE_META = "acpctl/role"
DEVICE_META = "acpctl/device"
# A load's replay as recorded, not joined and brought up to date (runner/served.py): what
# acpctl's remote link asks for, to deduplicate a reload against what the editor has.
REPLAY_META = "acpctl/replay"
REPLAY_AS_RECORDED = "as-recorded"
# In a load's or attach's answer `_meta`: how many stored updates its replay covered (a
# joined replay sends fewer lines). The link leaves that many out of a reload's replay.
REPLAYED_META = "acpctl/replayed"

# session/update discriminators (`update.sessionUpdate`)
USER_MESSAGE_CHUNK = "user_message_chunk"
AGENT_MESSAGE_CHUNK = "agent_message_chunk"
AGENT_THOUGHT_CHUNK = "agent_thought_chunk"
TOOL_CALL = "tool_call"
TOOL_CALL_UPDATE = "tool_call_update"
PLAN = "plan"
AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
CURRENT_MODE_UPDATE = "current_mode_update"
CONFIG_OPTION_UPDATE = "config_option_update"
SESSION_INFO_UPDATE = "session_info_update"
USAGE_UPDATE = "usage_update"
NOTICE = "notice"
COMPACTION_UPDATE = "compaction_update"
COMPACTION_SUMMARY_CHUNK = "compaction_summary_chunk"
# unstable
PLAN_UPDATE = "plan_update"
PLAN_REMOVED = "plan_removed"
SUBAGENT_UPDATE = "subagent_update"
SESSION_MESSAGE = "session_message"
SESSION_MESSAGE_CHUNK = "session_message_chunk"

# Stop reasons
END_TURN = "end_turn"
MAX_TOKENS = "max_tokens"
MAX_TURN_REQUESTS = "max_turn_requests"
REFUSAL = "refusal"
CANCELLED = "cancelled"

# Permission option kinds
ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"

# Error codes: JSON-RPC's own (named here too, as ACP uses them), then ACP's
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002
# An initialize asking for a version the agent does not speak (data: requested, supported).
UNSUPPORTED_PROTOCOL_VERSION = -32022
# The host's: an observer's request to act. (The attach proposal says -32002, which ACP v1
# already gives to "resource not found".)
NOT_AUTHORISED = -32001


def is_extension(method: str) -> bool:
    """An extension method (ACP: a name that starts with an underscore)."""
    return method.startswith("_")


# == What acpctl does with each method =================================================


class Handling(Enum):
    SERVED = "served"  # acpctl answers it itself (consulting the agent where it can)
    ADJUSTED = "adjusted"  # relayed, and acpctl reads or changes the answer
    RELAYED = "relayed"  # passed through, ids mapped
    NOT_RELAYED = "not relayed"  # meaningless through acpctl; answered with an error


class Method:
    """One method: who sends it, what acpctl does, why, and where ids sit in it.

    Paths are dotted keys into params (requests, notifications) or the result;
    `[]` steps into every element of an array."""

    __slots__ = (
        "handling",
        "notification",
        "request_ids",
        "result_session_ids",
        "sender",
        "session_ids",
        "why",
    )

    def __init__(
        self,
        sender: str,
        handling: Handling,
        why: str,
        session_ids: tuple[str, ...] = (),
        request_ids: tuple[str, ...] = (),
        result_session_ids: tuple[str, ...] = (),
        notification: bool = False,
    ) -> None:
        self.sender = sender  # "client", "agent" or "either"
        self.handling = handling
        self.why = why
        self.session_ids = session_ids  # session ids in params
        self.request_ids = request_ids  # ids of requests on the other hop, in params
        self.result_session_ids = result_session_ids  # session ids in the result
        self.notification = notification


_SESSION = ("sessionId",)

METHODS: dict[str, Method] = {
    INITIALIZE: Method(
        "client",
        Handling.ADJUSTED,
        "relayed with the protocol version capped at what acpctl implements; acpctl adds "
        "the session capabilities it serves from its history and replays the handshake "
        "after an agent restart",
    ),
    AUTHENTICATE: Method(
        "client",
        Handling.ADJUSTED,
        "relayed; a success is remembered and replayed after an agent restart",
    ),
    LOGOUT: Method(
        "client",
        Handling.ADJUSTED,
        "relayed; a success forgets the authenticate acpctl would replay after a restart",
    ),
    SESSION_NEW: Method(
        "client",
        Handling.SERVED,
        "relayed, then registered and recorded; the session's modes and config options are kept",
        result_session_ids=_SESSION,
    ),
    SESSION_LOAD: Method(
        "client",
        Handling.SERVED,
        "replayed from acpctl's history, then the agent is attached (resume, load or a "
        "fresh session with its mode and options re-applied); sessions only the agent "
        "knows are loaded through the agent and recorded from then on",
        session_ids=_SESSION,
    ),
    SESSION_RESUME: Method(
        "client",
        Handling.SERVED,
        "as session/load without the replay",
        session_ids=_SESSION,
    ),
    SESSION_LIST: Method(
        "client",
        Handling.SERVED,
        "this agent's sessions from acpctl's history, merged with the agent's own list",
        result_session_ids=("sessions[].sessionId",),
    ),
    SESSION_FORK: Method(
        "client",
        Handling.SERVED,
        "relayed when the agent forks; otherwise acpctl copies the history and attaches "
        "a fresh agent session; either way the fork is recorded with its parent",
        session_ids=_SESSION,
        result_session_ids=_SESSION,
    ),
    SESSION_CLOSE: Method(
        "client",
        Handling.SERVED,
        "a running turn is cancelled first; relayed when the agent supports it",
        session_ids=_SESSION,
    ),
    SESSION_DELETE: Method(
        "client",
        Handling.SERVED,
        "deletes acpctl's history; relayed when the agent supports it",
        session_ids=_SESSION,
    ),
    SESSION_ATTACH: Method(
        "client",
        Handling.SERVED,
        "joins a session open at the agent (the multi-client proposal): its history replayed "
        "as the policy asks, its updates from then on, as a controller or an observer",
        session_ids=_SESSION,
    ),
    SESSION_DETACH: Method(
        "client",
        Handling.SERVED,
        "leaves a session without ending it; the other clients are told",
        session_ids=_SESSION,
    ),
    SESSION_PROMPT: Method(
        "client",
        Handling.SERVED,
        "recorded and relayed; queued per session unless the agent queues prompts itself",
        session_ids=_SESSION,
    ),
    SESSION_CANCEL: Method(
        "client",
        Handling.ADJUSTED,
        "relayed; also ends queued prompts and settles the session's open permission dialogs",
        session_ids=_SESSION,
        notification=True,
    ),
    SESSION_SET_MODE: Method(
        "client",
        Handling.ADJUSTED,
        "relayed; the mode is kept and re-applied after a context-less reattach",
        session_ids=_SESSION,
    ),
    SESSION_SET_CONFIG_OPTION: Method(
        "client",
        Handling.ADJUSTED,
        "relayed; the options are kept and re-applied after a context-less reattach",
        session_ids=_SESSION,
    ),
    SESSION_SET_MODEL: Method(
        "client",
        Handling.ADJUSTED,
        "in neither v1 schema of @agentclientprotocol/sdk 2.4.0, but claude-agent-acp, "
        "gemini-cli and codex-acp still answer it: relayed; the model is kept and re-applied "
        "after a context-less reattach",
        session_ids=_SESSION,
    ),
    SESSION_SET_TITLE: Method(
        "client",
        Handling.ADJUSTED,
        "relayed when the agent supports it; the title is stored in acpctl's history",
        session_ids=_SESSION,
    ),
    SESSION_STATUS: Method("client", Handling.RELAYED, "the agent's own state", _SESSION),
    SESSION_ARCHIVE: Method("client", Handling.RELAYED, "the agent's own state", _SESSION),
    SESSION_UNARCHIVE: Method("client", Handling.RELAYED, "the agent's own state", _SESSION),
    AUTH_STATUS: Method("client", Handling.RELAYED, "the agent's own state"),
    PROVIDERS_LIST: Method("client", Handling.RELAYED, "the agent's own configuration"),
    PROVIDERS_SET: Method("client", Handling.RELAYED, "the agent's own configuration"),
    PROVIDERS_DISABLE: Method("client", Handling.RELAYED, "the agent's own configuration"),
    PROXY_INITIALIZE: Method(
        "client",
        Handling.NOT_RELAYED,
        "acpctl is not a proxy chain conductor; the agent behind it is not a proxy",
    ),
    PROXY_SUCCESSOR: Method(
        "either",
        Handling.NOT_RELAYED,
        "acpctl is not a proxy chain conductor; the agent behind it is not a proxy",
    ),
    SESSION_UPDATE: Method(
        "agent",
        Handling.ADJUSTED,
        "relayed as the agent's bytes when no id changes; recorded; mode, options, title "
        "and usage kept",
        session_ids=(
            "sessionId",
            "update.sessionId",
            "update.senderSessionId",
            "update.recipientSessionId",
        ),
        notification=True,
    ),
    REQUEST_PERMISSION: Method(
        "agent",
        Handling.ADJUSTED,
        "relayed under acpctl's id; settled as cancelled when the turn is cancelled or "
        "the agent dies",
        session_ids=_SESSION,
    ),
    FS_READ_TEXT_FILE: Method("agent", Handling.RELAYED, "the editor's buffers", _SESSION),
    FS_WRITE_TEXT_FILE: Method("agent", Handling.RELAYED, "the editor's buffers", _SESSION),
    TERMINAL_CREATE: Method("agent", Handling.RELAYED, "the editor's terminals", _SESSION),
    TERMINAL_OUTPUT: Method("agent", Handling.RELAYED, "the editor's terminals", _SESSION),
    TERMINAL_WAIT_FOR_EXIT: Method("agent", Handling.RELAYED, "the editor's terminals", _SESSION),
    TERMINAL_KILL: Method("agent", Handling.RELAYED, "the editor's terminals", _SESSION),
    TERMINAL_RELEASE: Method("agent", Handling.RELAYED, "the editor's terminals", _SESSION),
    ELICITATION_CREATE: Method(
        "agent",
        Handling.ADJUSTED,
        "the editor asks the user; a request-scoped one names the editor's request; a "
        "session's is recorded with its answer and who gave it, and settled as cancel when "
        "the turn is cancelled",
        session_ids=_SESSION,
        request_ids=("requestId",),
    ),
    ELICITATION_COMPLETE: Method(
        "agent", Handling.RELAYED, "the editor closes its form", notification=True
    ),
    AUTH_STATUS_UPDATE: Method("agent", Handling.RELAYED, "the editor shows it", notification=True),
    MCP_MESSAGE: Method(
        "either", Handling.RELAYED, "MCP over ACP between the editor's servers and the agent"
    ),
    CANCEL_REQUEST: Method(
        "either",
        Handling.ADJUSTED,
        "the request id is translated to the other hop's",
        request_ids=("requestId",),
        notification=True,
    ),
}

# == What acpctl does with each session/update kind ====================================

RECORDED = "recorded and relayed"
UPDATES: dict[str, str] = {
    USER_MESSAGE_CHUNK: RECORDED,
    AGENT_MESSAGE_CHUNK: RECORDED,
    AGENT_THOUGHT_CHUNK: RECORDED,
    TOOL_CALL: RECORDED,
    TOOL_CALL_UPDATE: RECORDED,
    PLAN: RECORDED,
    PLAN_UPDATE: RECORDED,
    PLAN_REMOVED: RECORDED,
    AVAILABLE_COMMANDS_UPDATE: RECORDED,
    CURRENT_MODE_UPDATE: RECORDED + "; the mode is kept for load, resume and reattach",
    CONFIG_OPTION_UPDATE: RECORDED + "; the options are kept for load, resume and reattach",
    SESSION_INFO_UPDATE: RECORDED + "; the title is stored for session/list",
    USAGE_UPDATE: RECORDED,
    NOTICE: RECORDED + "; left out of a load's replay: ACP says a notice is no part of the history",
    COMPACTION_UPDATE: RECORDED,
    COMPACTION_SUMMARY_CHUNK: RECORDED,
    SUBAGENT_UPDATE: RECORDED
    + "; the child it announces is a session of its own from then on: its updates and "
    "requests relayed both ways, its history kept, linked to the parent (subagentOf)",
    SESSION_MESSAGE: RECORDED + "; its session ids are mapped when acpctl knows them",
    SESSION_MESSAGE_CHUNK: RECORDED + "; its session ids are mapped when acpctl knows them",
}


PARAMS_OPEN = '"params":{'
_PARAMS_OPEN_BYTES = PARAMS_OPEN.encode()


def params_opened(line: str | bytes) -> int:
    """Where the members of a message line's params begin (just after `"params":{`), or -1
    where that is not certain from the text alone: the first `"params":{` must have only
    the message's own `{` before it, so that it is this message's params key and not text
    in a string (a `{` in a string before it, or spaces around the colon, and it is not).
    How acpctl changes a relayed line without encoding it again (the host puts a cursor in
    and the link takes it out again: cursors_wire.py; the server changes a session id); the
    line as bytes or as text, whichever the caller holds."""
    if isinstance(line, bytes):
        at = line.find(_PARAMS_OPEN_BYTES)
        braces = line.count(b"{", 0, at)
    else:
        at = line.find(PARAMS_OPEN)
        braces = line.count("{", 0, at)
    if at < 0 or braces != 1:
        return -1
    return at + len(PARAMS_OPEN)

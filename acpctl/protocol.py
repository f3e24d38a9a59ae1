"""ACP v1 wire names in one table: methods, update kinds, stop reasons, error codes.

Everything else refers to these constants; no module spells a wire name itself.
"""

from __future__ import annotations

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

# Either direction
CANCEL_REQUEST = "$/cancel_request"

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

# JSON-RPC and ACP error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

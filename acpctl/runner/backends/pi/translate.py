"""Translation between ACP and pi's `--mode rpc` JSONL protocol. Pure functions, except that
a tool's diff reads the file it is about to change (`planned_diff`).

Prompt content blocks become pi input; pi events become ACP session/update payloads. The
stream repair lives here too: pi's text events may be deltas or cumulative snapshots, and a
final message may hold text that never came as an event; StreamText sends exactly the part
the client has not seen.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError

TOOL_KINDS = {
    "read": "read",
    "edit": "edit",
    "write": "edit",
    "bash": "execute",
    "grep": "search",
    "find": "search",
    "ls": "search",
}


def prompt_input(
    blocks: list[Any], accepts_images: bool
) -> tuple[str, list[JsonObject], list[str]]:
    """(message text, pi images, notes about what was dropped)."""
    parts: list[str] = []
    images: list[JsonObject] = []
    dropped: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource_link":
            name = block.get("name") or block.get("uri")
            parts.append(f"[{name}]({block.get('uri')})")
        elif kind == "resource":
            resource = block.get("resource") or {}
            if "text" in resource:
                parts.append(
                    f'<resource uri="{resource.get("uri", "")}">\n{resource["text"]}\n</resource>'
                )
            else:
                dropped.append(f"binary resource {resource.get('uri', '')}")
        elif kind == "image" and accepts_images:
            images.append(
                {
                    "type": "image",
                    "data": block.get("data", ""),
                    "mimeType": block.get("mimeType", "image/png"),
                }
            )
        else:
            dropped.append(
                f"{kind} block" + ("" if kind != "image" else " (the model does not accept images)")
            )
    return "\n\n".join(parts), images, dropped


class StreamText:
    """What of one content block has been sent, so that the rest is sent exactly once."""

    def __init__(self) -> None:
        self.sent: dict[int, str] = {}

    def missing(self, index: int, full: str) -> str:
        """The part of `full` (the block's whole text so far) not yet sent."""
        sent = self.sent.get(index, "")
        if full.startswith(sent):
            self.sent[index] = full
            return full[len(sent) :]
        return ""  # the backend rewrote the text: never send something twice

    def delta(self, index: int, piece: str, snapshot: str | None) -> str:
        """For a delta event: trust the partial message's text when there is one (it is
        correct whether the backend sends deltas or snapshots), else the delta."""
        if snapshot is not None:
            return self.missing(index, snapshot)
        sent = self.sent.get(index, "")
        if sent and piece.startswith(sent):  # a cumulative snapshot sent as a delta
            return self.missing(index, piece)
        self.sent[index] = sent + piece
        return piece


def block_text(message: Any, index: int, field: str) -> str | None:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and 0 <= index < len(content):
        block = content[index]
        if isinstance(block, dict) and isinstance(block.get(field), str):
            return str(block[field])
    return None


def chunk(kind: str, text: str) -> JsonObject:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def planned_diff(name: str, args: JsonObject, cwd: str) -> JsonObject | None:
    """The diff an edit or write is about to make, as ACP `diff` content."""
    path = args.get("path")
    if name not in ("edit", "write") or not isinstance(path, str):
        return None
    absolute = path if Path(path).is_absolute() else str(Path(cwd) / path)
    old = _read(absolute)
    if name == "write":
        new = str(args.get("content", ""))
    else:
        old_text, new_text = args.get("oldText"), args.get("newText")
        if not isinstance(old_text, str) or not isinstance(new_text, str):
            return None
        new = old.replace(old_text, new_text, 1) if old is not None else new_text
        if old is None:
            old = old_text
    return {"type": "diff", "path": absolute, "oldText": old, "newText": new}


def tool_title(name: str, args: JsonObject) -> str:
    subject = args.get("path") or args.get("command") or args.get("pattern") or ""
    return f"{name} {subject}".strip()


def tool_call(
    tool_id: str, name: str, args: JsonObject, status: str, cwd: str, update: bool = False
) -> JsonObject:
    payload: JsonObject = {
        "sessionUpdate": acp.TOOL_CALL_UPDATE if update else acp.TOOL_CALL,
        "toolCallId": tool_id,
        "title": tool_title(name, args),
        "kind": TOOL_KINDS.get(name, "other"),
        "status": status,
        "rawInput": args,
    }
    path = args.get("path")
    if isinstance(path, str):
        absolute = path if Path(path).is_absolute() else str(Path(cwd) / path)
        payload["locations"] = [{"path": absolute}]
    diff = planned_diff(name, args, cwd)
    if diff is not None:
        payload["content"] = [diff]
    return payload


def result_text(result: Any) -> str:
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return ""
    return "".join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def tool_progress(tool_id: str, partial: Any) -> JsonObject:
    """tool_execution_update carries the whole output so far: it replaces the content."""
    return {
        "sessionUpdate": acp.TOOL_CALL_UPDATE,
        "toolCallId": tool_id,
        "content": [{"type": "content", "content": {"type": "text", "text": result_text(partial)}}],
    }


def tool_end(
    tool_id: str,
    name: str,
    event: JsonObject,
    before: JsonObject | None,
) -> JsonObject:
    failed = bool(event.get("isError"))
    content: list[JsonObject] = []
    if before is not None and not failed:
        after = _read(str(before["path"]))
        if after is not None and after != before.get("oldText"):
            content.append({**before, "newText": after})
    text = result_text(event.get("result"))
    if text:
        content.append({"type": "content", "content": {"type": "text", "text": text}})
    return {
        "sessionUpdate": acp.TOOL_CALL_UPDATE,
        "toolCallId": tool_id,
        "status": "failed" if failed else "completed",
        "content": content,
        "rawOutput": event.get("result"),
    }


def plan(event: JsonObject) -> JsonObject | None:
    """A plan from a plan-mode extension (`plan_mode_complete`), if it carries steps."""
    steps = event.get("steps") or event.get("plan") or event.get("entries")
    if not isinstance(steps, list):
        return None
    entries = []
    for step in steps:
        text = (
            step
            if isinstance(step, str)
            else (step.get("content") or step.get("text") if isinstance(step, dict) else None)
        )
        if text:
            status = step.get("status", "pending") if isinstance(step, dict) else "pending"
            entries.append(
                {
                    "content": str(text),
                    "priority": "medium",
                    "status": status
                    if status in ("pending", "in_progress", "completed")
                    else "pending",
                }
            )
    return {"sessionUpdate": acp.PLAN, "entries": entries} if entries else None


def stop_reason(message: Any) -> tuple[str | None, str | None]:
    """(ACP stop reason, error message) from the last assistant message of a run."""
    if not isinstance(message, dict):
        return acp.END_TURN, None
    reason = message.get("stopReason")
    if reason == "aborted":
        return acp.CANCELLED, None
    if reason == "length":
        return acp.MAX_TOKENS, None
    if reason == "error":
        return None, str(message.get("errorMessage") or "the model call failed")
    return acp.END_TURN, None


def permission_options(request: JsonObject) -> list[JsonObject]:
    """ACP options for a confirm or select dialog of pi's extension UI."""
    if request.get("method") == "confirm":
        return [
            {"optionId": "yes", "name": "Allow", "kind": acp.ALLOW_ONCE},
            {"optionId": "no", "name": "Reject", "kind": acp.REJECT_ONCE},
        ]
    options = []
    for index, label in enumerate(request.get("options") or []):
        text = str(label)
        rejecting = any(w in text.lower() for w in ("block", "deny", "reject", "no", "cancel"))
        options.append(
            {
                "optionId": f"choice-{index}",
                "name": text,
                "kind": acp.REJECT_ONCE if rejecting else acp.ALLOW_ONCE,
            }
        )
    return options


def dialog_answer(request: JsonObject, outcome: Any) -> JsonObject:
    """pi's extension_ui_response for the ACP permission outcome."""
    answer: JsonObject = {"type": "extension_ui_response", "id": request.get("id")}
    selected = (
        outcome.get("optionId")
        if isinstance(outcome, dict) and outcome.get("outcome") == "selected"
        else None
    )
    if selected is None:
        answer["cancelled"] = True
    elif request.get("method") == "confirm":
        answer["confirmed"] = selected == "yes"
    else:
        index = int(str(selected).removeprefix("choice-"))
        answer["value"] = (request.get("options") or [])[index]
    return answer


# == session state: config options, commands, usage ====================================

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
MODEL_OPTION = "model"
THINKING_OPTION = "thought_level"


def model_id(model: Any) -> str | None:
    """pi's model as one ACP value id: "provider/id"."""
    if isinstance(model, dict) and model.get("provider") and model.get("id"):
        return f"{model['provider']}/{model['id']}"
    return None


def config_options(state: JsonObject, models: list[Any]) -> list[JsonObject]:
    """pi's model and thinking level as ACP config options (what pi-acp offers as models
    and modes; config options are where ACP now puts both)."""
    options: list[JsonObject] = []
    choices = [
        {"value": value, "name": f"{m['provider']}/{m.get('name') or m['id']}"}
        for m in models
        if (value := model_id(m)) is not None
    ]
    current = model_id(state.get("model"))
    if choices:
        options.append(
            {
                "id": MODEL_OPTION,
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": current or choices[0]["value"],
                "options": choices,
            }
        )
    level = state.get("thinkingLevel")
    options.append(
        {
            "id": THINKING_OPTION,
            "name": "Thinking",
            "category": "thought_level",
            "type": "select",
            "currentValue": level if level in THINKING_LEVELS else "medium",
            "options": [{"value": value, "name": value} for value in THINKING_LEVELS],
        }
    )
    return options


def config_command(config_id: Any, value: Any) -> tuple[str, JsonObject]:
    """The pi command that sets an ACP config option (RpcError for an unknown one)."""
    if config_id == MODEL_OPTION and isinstance(value, str) and "/" in value:
        provider, model = value.split("/", 1)
        return "set_model", {"provider": provider, "modelId": model}
    if config_id == THINKING_OPTION and value in THINKING_LEVELS:
        return "set_thinking_level", {"level": value}
    raise RpcError(acp.INVALID_PARAMS, f"unknown option or value: {config_id}={value!r}")


def available_commands(answer: Any) -> JsonObject:
    """pi's get_commands (prompt templates and skills; extension commands need pi's own
    UI) as an available_commands_update."""
    commands = answer.get("commands") if isinstance(answer, dict) else None
    found = [
        {
            "name": command["name"],
            "description": str(command.get("description") or command.get("source") or ""),
            "input": {"hint": "arguments"},
        }
        for command in commands or []
        if isinstance(command, dict)
        and isinstance(command.get("name"), str)
        and command.get("source") != "extension"
    ]
    return {"sessionUpdate": acp.AVAILABLE_COMMANDS_UPDATE, "availableCommands": found}


# pi's usage fields, and ACP's (PromptResponse.usage) for them
_USAGE_FIELDS = (
    ("input", "inputTokens"),
    ("output", "outputTokens"),
    ("cacheRead", "cachedReadTokens"),
    ("cacheWrite", "cachedWriteTokens"),
    ("totalTokens", "totalTokens"),
)


def add_usage(total: dict[str, int], message: Any) -> None:
    """Add an assistant message's token counts to a turn's, in ACP's names."""
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict):
        return
    for theirs, ours in _USAGE_FIELDS:
        value = usage.get(theirs)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            total[ours] = total.get(ours, 0) + value


def usage(stats: Any) -> JsonObject | None:
    """pi's get_session_stats as a usage_update: context tokens used of the window, and the
    session's cost so far (pi prices in US dollars)."""
    context = stats.get("contextUsage") if isinstance(stats, dict) else None
    if not isinstance(context, dict):
        return None
    used, size = context.get("tokens"), context.get("contextWindow")
    if not isinstance(used, int) or not isinstance(size, int):
        return None
    update: JsonObject = {"sessionUpdate": acp.USAGE_UPDATE, "used": used, "size": size}
    cost = stats.get("cost")
    if isinstance(cost, (int, float)) and math.isfinite(cost):
        update["cost"] = {"amount": cost, "currency": "USD"}
    return update

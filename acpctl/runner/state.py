"""A session's modes, model and config options: as the agent last reported them (what
session/load and session/resume answer when the session is already open), and as the user
chose them (kept in the session's metadata, re-applied to a fresh agent session that has
to stand in for one whose context was lost)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject

STATE_KEYS = ("modes", "models", "configOptions")


@dataclass(frozen=True)
class _Selector:
    """A choice made by picking one of a list, and where each part of it sits."""

    chosen: str  # its key in the user's choices
    key: str  # its object in a session result ("modes")
    current: str  # the current id in that object ("currentModeId")
    available: str  # the list of choices in that object ("availableModes")
    item_id: str  # a choice's id in that list ("id")
    method: str  # the method that sets it
    param: str  # that method's param for the id ("modeId")


MODE = _Selector(
    "mode", "modes", "currentModeId", "availableModes", "id", acp.SESSION_SET_MODE, "modeId"
)
MODEL = _Selector(
    "model",
    "models",
    "currentModelId",
    "availableModels",
    "modelId",
    acp.SESSION_SET_MODEL,
    "modelId",
)
_SELECTORS = (MODE, MODEL)


class SessionState:
    def __init__(self, chosen: dict[str, Any]) -> None:
        self.reported: JsonObject = {}
        # The session metadata's own dict: saved with it.
        self.chosen = chosen

    def absorb(self, result: Any) -> None:
        """What a session/new, load, resume or fork result says."""
        if not isinstance(result, dict):
            return
        for key in STATE_KEYS:
            if isinstance(result.get(key), (dict, list)):
                self.reported[key] = result[key]
        if isinstance(result.get("configOptions"), list):
            self._choose_config(result["configOptions"])
        for selector in _SELECTORS:
            state = result.get(selector.key)
            if isinstance(state, dict) and isinstance(state.get(selector.current), str):
                self.chosen[selector.chosen] = state[selector.current]

    def as_result(self) -> JsonObject:
        return dict(self.reported)

    def on_update(self, update: JsonObject) -> None:
        kind = update.get("sessionUpdate")
        if kind == acp.CURRENT_MODE_UPDATE and isinstance(update.get("currentModeId"), str):
            self._select(MODE, update["currentModeId"])
        elif kind == acp.CONFIG_OPTION_UPDATE and isinstance(update.get("configOptions"), list):
            self.reported["configOptions"] = update["configOptions"]
            self._choose_config(update["configOptions"])

    def on_set(self, method: str, params: JsonObject, result: Any) -> None:
        """The agent accepted session/set_mode, set_model or set_config_option."""
        for selector in _SELECTORS:
            if method == selector.method and isinstance(params.get(selector.param), str):
                self._select(selector, params[selector.param])
        if method == acp.SESSION_SET_CONFIG_OPTION:
            if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
                self.reported["configOptions"] = result["configOptions"]
            if isinstance(params.get("configId"), str) and "value" in params:
                self.chosen.setdefault("config", {})[params["configId"]] = params["value"]

    def restore_calls(self, fresh: Any, agent_session_id: str) -> list[tuple[str, JsonObject]]:
        """The requests that give a fresh agent session (whose new result is `fresh`) the
        mode, model and options the user chose, where the fresh session offers them."""
        fresh = fresh if isinstance(fresh, dict) else {}
        calls: list[tuple[str, JsonObject]] = []
        session = {"sessionId": agent_session_id}
        for selector in _SELECTORS:
            state = fresh.get(selector.key)
            wanted = self.chosen.get(selector.chosen)
            if not isinstance(state, dict) or not wanted or wanted == state.get(selector.current):
                continue
            items = state.get(selector.available) or []
            if wanted in {item.get(selector.item_id) for item in items if isinstance(item, dict)}:
                calls.append((selector.method, {**session, selector.param: wanted}))
        offered = {
            option.get("id"): option
            for option in fresh.get("configOptions") or []
            if isinstance(option, dict)
        }
        for config_id, value in (self.chosen.get("config") or {}).items():
            option = offered.get(config_id)
            if option is not None and option.get("currentValue") != value:
                params: JsonObject = {**session, "configId": config_id, "value": value}
                if isinstance(value, bool):
                    params["type"] = "boolean"
                calls.append((acp.SESSION_SET_CONFIG_OPTION, params))
        return calls

    def _select(self, selector: _Selector, value: str) -> None:
        state = self.reported.get(selector.key)
        if isinstance(state, dict):
            self.reported[selector.key] = {**state, selector.current: value}
        self.chosen[selector.chosen] = value

    def _choose_config(self, options: list[Any]) -> None:
        self.chosen["config"] = {
            option["id"]: option["currentValue"]
            for option in options
            if isinstance(option, dict)
            and isinstance(option.get("id"), str)
            and "currentValue" in option
        }

"""A session's modes, model and config options: as the agent last reported them (what
session/load and session/resume answer when the session is already open), and as the user
chose them (kept in the session's metadata, re-applied to a fresh agent session that has
to stand in for one whose context was lost)."""

from __future__ import annotations

from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject

STATE_KEYS = ("modes", "models", "configOptions")
# The choices made by picking one of a list: (chosen key, result key, its current id, its
# list, an item's id, the method that sets it, that method's param).
_SELECTORS = (
    ("mode", "modes", "currentModeId", "availableModes", "id", acp.SESSION_SET_MODE, "modeId"),
    (
        "model",
        "models",
        "currentModelId",
        "availableModels",
        "modelId",
        acp.SESSION_SET_MODEL,
        "modelId",
    ),
)


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
        modes = result.get("modes")
        if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
            self.chosen["mode"] = modes["currentModeId"]
        models = result.get("models")
        if isinstance(models, dict) and isinstance(models.get("currentModelId"), str):
            self.chosen["model"] = models["currentModelId"]

    def as_result(self) -> JsonObject:
        return dict(self.reported)

    def on_update(self, update: JsonObject) -> None:
        kind = update.get("sessionUpdate")
        if kind == acp.CURRENT_MODE_UPDATE and isinstance(update.get("currentModeId"), str):
            self._set_mode(update["currentModeId"])
        elif kind == acp.CONFIG_OPTION_UPDATE and isinstance(update.get("configOptions"), list):
            self.reported["configOptions"] = update["configOptions"]
            self._choose_config(update["configOptions"])

    def on_set(self, method: str, params: JsonObject, result: Any) -> None:
        """The agent accepted session/set_mode, set_model or set_config_option."""
        if method == acp.SESSION_SET_MODE and isinstance(params.get("modeId"), str):
            self._set_mode(params["modeId"])
        elif method == acp.SESSION_SET_MODEL and isinstance(params.get("modelId"), str):
            models = self.reported.get("models")
            if isinstance(models, dict):
                self.reported["models"] = {**models, "currentModelId": params["modelId"]}
            self.chosen["model"] = params["modelId"]
        elif method == acp.SESSION_SET_CONFIG_OPTION:
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
        for choice, key, current, available, item_id, method, param in _SELECTORS:
            state = fresh.get(key)
            wanted = self.chosen.get(choice)
            if not isinstance(state, dict) or not wanted or wanted == state.get(current):
                continue
            offered_ids = {
                i.get(item_id) for i in state.get(available) or [] if isinstance(i, dict)
            }
            if wanted in offered_ids:
                calls.append((method, {**session, param: wanted}))
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

    def _set_mode(self, mode_id: str) -> None:
        modes = self.reported.get("modes")
        if isinstance(modes, dict):
            self.reported["modes"] = {**modes, "currentModeId": mode_id}
        self.chosen["mode"] = mode_id

    def _choose_config(self, options: list[Any]) -> None:
        self.chosen["config"] = {
            option["id"]: option["currentValue"]
            for option in options
            if isinstance(option, dict)
            and isinstance(option.get("id"), str)
            and "currentValue" in option
        }

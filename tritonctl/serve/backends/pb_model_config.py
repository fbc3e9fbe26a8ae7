"""``pb_utils.ModelConfig``: what a Python model's ``auto_complete_config`` receives and returns.

It wraps the model's config as Triton's JSON (``as_dict()``) and lets the model fill in only what
Triton's Python backend lets it: ``max_batch_size``, inputs, outputs, dynamic batching and the
decoupled transaction policy. Each refusal is a ValueError with Triton's words.
"""

from __future__ import annotations

import json

INPUT_PROPERTIES = ("name", "data_type", "dims", "optional")
OUTPUT_PROPERTIES = ("name", "data_type", "dims")


class ModelConfig:
    def __init__(self, model_config: str):
        self._model_config: dict = json.loads(model_config)
        self._model_config.setdefault("input", [])
        self._model_config.setdefault("output", [])

    @property
    def _name(self) -> str:
        return self._model_config.get("name", "")

    def as_dict(self) -> dict:
        return self._model_config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = int(self._model_config.get("max_batch_size", 0))
        if configured > max_batch_size:
            raise ValueError(f"configuration specified max_batch_size {configured}, but in auto-complete-config "
                             f"function for model '{self._name}' specified max_batch_size {max_batch_size}")
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(f"Configuration specified scheduling_choice as '{scheduler}', but "
                                 f"auto-complete-config function for model '{self._name}' tries to set "
                                 "scheduling_choice as 'dynamic_batching'")
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict) -> None:  # noqa: A002 - Triton's parameter name
        self._add_tensor("input", input, INPUT_PROPERTIES)

    def add_output(self, output: dict) -> None:
        self._add_tensor("output", output, OUTPUT_PROPERTIES)

    def set_model_transaction_policy(self, transaction_policy_dict: dict) -> None:
        if any(key != "decoupled" for key in transaction_policy_dict):
            raise ValueError(f"model transaction property in auto-complete-config function for model "
                             f"'{self._name}' contains property other than 'decoupled'.")
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(f"trying to change decoupled property in auto-complete-config for model "
                                 f"'{self._name}', which is already set to '{policy['decoupled']}'.")
            policy["decoupled"] = wanted

    def _add_tensor(self, kind: str, tensor: dict, allowed: tuple[str, ...]) -> None:
        """Add ``tensor`` to the config's ``kind`` list, or complete the entry of the same name."""
        label = f"{kind} '{tensor.get('name', '')}' in auto-complete-config function for model '{self._name}'"
        if any(key not in allowed for key in tensor):
            listed = ", ".join(f"'{key}'" for key in allowed[:-1]) + f" and '{allowed[-1]}'"
            raise ValueError(f"{label} contains property other than {listed}.")
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{self._name}' is missing "
                             "'name' property.")
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{label} is missing '{key}' property.")
        for current in self._model_config[kind]:
            if current.get("name") != tensor["name"]:
                continue
            configured_type = current.get("data_type", "TYPE_INVALID")
            if configured_type != "TYPE_INVALID" and configured_type != tensor["data_type"]:
                raise ValueError(f"unable to load model '{self._name}', configuration expects datatype "
                                 f"{configured_type} for {kind} '{tensor['name']}', model provides "
                                 f"{tensor['data_type']}")
            if current.get("dims") and list(current["dims"]) != list(tensor["dims"]):
                raise ValueError(f"model '{self._name}', tensor '{tensor['name']}': the model expects dims "
                                 f"{list(tensor['dims'])} but the model configuration specifies dims "
                                 f"{list(current['dims'])}")
            if "optional" in current and "optional" in tensor and current["optional"] != tensor["optional"]:
                raise ValueError(f"model '{self._name}', tensor '{tensor['name']}': the model expects optional "
                                 f"{tensor['optional']} but the model configuration specifies optional "
                                 f"{current['optional']}")
            current.update(tensor)
            return
        self._model_config[kind].append(dict(tensor))

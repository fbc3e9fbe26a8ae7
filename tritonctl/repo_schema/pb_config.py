"""The part of Triton's ``triton_python_backend_utils`` (``pb_utils``) that needs no server.

``ModelConfig`` is what a Python model's ``auto_complete_config`` receives and returns: the
model's config as Triton's JSON (``as_dict()``) plus the only changes Triton's Python backend lets
a model make (``set_max_batch_size``, ``add_input``, ``add_output``, ``set_dynamic_batching``,
``set_model_transaction_policy``). Each refusal is a ValueError with the Python backend's own
words, so a diagnostic can quote what ``tritonserver`` would log.

``config_to_json`` is Triton's ``ModelConfigToJson``, the JSON a model sees (in ``as_dict()`` and
in ``initialize``'s ``args["model_config"]``). ``validate`` evaluates ``auto_complete_config`` with
this module; ``serve``'s ``pb_utils`` re-exports it, so both share one implementation.
"""

from __future__ import annotations

import json
import numbers

INPUT_PROPERTIES = ("name", "data_type", "dims", "optional")
OUTPUT_PROPERTIES = ("name", "data_type", "dims")
TRANSACTION_PROPERTIES = ("decoupled",)

_INT64_TYPES = {3, 4, 6, 16, 18}  # FieldDescriptor.TYPE_INT64, UINT64, FIXED64, SFIXED64, SINT64


class TritonError:
    """An error a model puts in an ``InferenceResponse``; ``code`` is one of the class constants."""

    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)

    def __init__(self, message: str, code: int = INTERNAL):
        if not isinstance(message, str) or not isinstance(code, numbers.Integral):  # as Triton's binding
            raise TypeError(f"TritonError(): incompatible function arguments: takes a str message and a "
                            f"TritonError code, got {type(message).__name__} and {type(code).__name__}")
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r})"


class TritonModelException(Exception):
    """Raised by the pb_utils helpers when a model uses them wrongly (and by models themselves)."""


class ModelConfig:
    """``pb_utils.ModelConfig``: the config ``auto_complete_config`` may complete."""

    def __init__(self, model_config: str):
        self._model_config: dict = json.loads(model_config)

    def as_dict(self) -> dict:
        return self._model_config

    @property
    def _name(self) -> str:
        return self._model_config["name"]

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = self._model_config["max_batch_size"]
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
        if any(key not in TRANSACTION_PROPERTIES for key in transaction_policy_dict):
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
        """Add ``tensor`` to the ``kind`` list, or complete the listed entry of the same name.

        The checks run in the Python backend's order: unknown properties (the message names the
        tensor, so a tensor without a name fails on the lookup, as there), then the missing
        properties, then a listed entry of the same name that disagrees.
        """
        if any(key not in allowed for key in tensor):
            listed = ", ".join(f"'{key}'" for key in allowed[:-1]) + f" and '{allowed[-1]}'"
            raise ValueError(f"{kind} '{tensor['name']}' in auto-complete-config function for model "
                             f"'{self._name}' contains property other than {listed}.")
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{self._name}' is missing "
                             "'name' property.")
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{kind} '{tensor['name']}' in auto-complete-config function for model "
                                 f"'{self._name}' is missing '{key}' property.")
        for current in self._model_config[kind]:
            if current["name"] != tensor["name"]:
                continue
            if current["data_type"] != "TYPE_INVALID" and current["data_type"] != tensor["data_type"]:
                raise ValueError(f"unable to load model '{self._name}', configuration expects datatype "
                                 f"{current['data_type']} for {kind} '{tensor['name']}', model provides "
                                 f"{tensor['data_type']}")
            if current["dims"] and current["dims"] != tensor["dims"]:
                raise ValueError(f"model '{self._name}', tensor '{tensor['name']}': the model expects dims "
                                 f"{tensor['dims']} but the model configuration specifies dims {current['dims']}")
            if kind == "input" and "optional" in current and "optional" in tensor \
                    and current["optional"] != tensor["optional"]:
                raise ValueError(f"model '{self._name}', tensor '{tensor['name']}': the model expects optional "
                                 f"{tensor['optional']} but the model configuration specifies optional "
                                 f"{current['optional']}")
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        self._model_config[kind].append(tensor)


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("input", []) if t.get("name") == name), None)


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("output", []) if t.get("name") == name), None)


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


def config_to_json(config) -> dict:
    """Triton's ModelConfigToJson: proto field names, defaults printed, int64 as JSON numbers."""
    from google.protobuf import json_format

    data = json_format.MessageToDict(config, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)
    return _int64_to_numbers(config.DESCRIPTOR, data)


def _int64_to_numbers(descriptor, data):
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                if value_field.message_type is not None:
                    for key in value:
                        _int64_to_numbers(value_field.message_type, value[key])
                elif value_field.type in _INT64_TYPES:
                    data[field.name] = {k: int(v) for k, v in value.items()}
            elif isinstance(value, list):
                for item in value:
                    _int64_to_numbers(field.message_type, item)
            else:
                _int64_to_numbers(field.message_type, value)
        elif field.type in _INT64_TYPES:
            data[field.name] = [int(v) for v in value] if isinstance(value, list) else int(value)
    return data

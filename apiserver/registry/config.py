"""ConfigMaps and Secrets: kube's defaults, decoding and validation (pkg/apis/core/validation:
ValidateConfigMap, ValidateSecret and their Update forms).

Flow: `decode_body` type-checks the body and, for base64 fields (a Secret's `data`, a ConfigMap's
`binaryData`), decodes each value (400 `illegal base64 data at input byte N`, as Go's decoder says) and stores
it re-encoded in canonical form; `prepare_create`/`prepare_update` fold a Secret's `stringData` into `data`
(stringData wins, then disappears, as the internal conversion does) and default its `type` to Opaque;
`validate` checks key names, the 1 MiB total, the type's required keys and `immutable`.

Secret values never appear in a message: errors name the key and the rule, never the value.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Cause, Strategy, value_repr
from apiserver.status import bad_request

MAX_SIZE = 1024 * 1024  # core.MaxSecretSize, the limit of a ConfigMap and of a Secret
MAX_KEY_LENGTH = 253
_KEY = re.compile(r"[-._a-zA-Z0-9]+")
KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"
TOO_LONG = f"Too long: may not be more than {MAX_SIZE} bytes"
SECRET_TYPE_OPAQUE = "Opaque"
# The keys kube requires for each well-known Secret type (ValidateSecret's switch).
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"


def key_problems(key: str) -> list[str]:
    """validation.IsConfigMapKey: the messages for one data key (empty when valid)."""
    problems = []
    if len(key) > MAX_KEY_LENGTH:
        problems.append(f"must be no more than {MAX_KEY_LENGTH} characters")
    if not _KEY.fullmatch(key):
        problems.append(KEY_MESSAGE)
    if key == ".":
        problems.append("must not be '.'")
    elif key == "..":
        problems.append("must not be '..'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def _key_causes(field: str, keys: Any) -> list[Cause]:
    return [
        (f"{field}[{key}]", "FieldValueInvalid", f"Invalid value: {value_repr(key)}: {problem}")
        for key in keys
        for problem in key_problems(str(key))
    ]


def decode_base64(text: str) -> bytes:
    """Go's base64.StdEncoding.DecodeString (which skips CR and LF); ValueError names the bad byte."""
    compact = text.replace("\r", "").replace("\n", "")
    for index, char in enumerate(compact):
        if not (char.isascii() and (char.isalnum() or char in "+/=")):
            raise ValueError(f"illegal base64 data at input byte {index}")
    try:
        return base64.b64decode(compact, validate=True)
    except binascii.Error:
        raise ValueError(f"illegal base64 data at input byte {max(len(compact) - 1, 0)}") from None


def _decode_values(strategy: Strategy, obj: dict[str, Any], field: str) -> None:
    """Check each base64 value of obj[field]; store it re-encoded (Go decodes to []byte and re-encodes)."""
    values = obj.get(field)
    if not values:
        return
    info = strategy.info
    decoded: dict[str, str] = {}
    for key, value in values.items():
        if not isinstance(value, str):
            raise bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                f"{field}[{key}]: expected a base64 string"
            )
        try:
            decoded[key] = base64.b64encode(decode_base64(value)).decode()
        except ValueError as exc:  # the message names a byte offset, never the value
            raise bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: {exc}'
            ) from None
    obj[field] = decoded


def _base64_size(values: Mapping[str, Any] | None) -> int:
    return sum(len(base64.b64decode(v)) for v in (values or {}).values())


def _immutable_causes(new: Mapping[str, Any], old: Mapping[str, Any], fields: tuple[str, ...]) -> list[Cause]:
    if not old.get("immutable"):
        return []
    causes: list[Cause] = []
    if not new.get("immutable"):
        causes.append(("immutable", "FieldValueForbidden", IMMUTABLE))
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append((field, "FieldValueForbidden", IMMUTABLE))
    return causes


class ConfigMapStrategy(Strategy):
    model = "V1ConfigMap"

    def decode_body(self, body: object, strict: bool) -> tuple[dict[str, Any], list[str]]:
        obj, warnings = super().decode_body(body, strict)
        _decode_values(self, obj, "binaryData")
        return obj, warnings

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        causes = _key_causes("data", data)
        duplicate = "duplicate of key present in binaryData"
        causes += [
            (f"data[{key}]", "FieldValueInvalid", f"Invalid value: {value_repr(key)}: {duplicate}")
            for key in data
            if key in binary
        ]
        causes += _key_causes("binaryData", binary)
        size = sum(len(str(v).encode()) for v in data.values()) + _base64_size(binary)
        if size > MAX_SIZE:
            causes.append(("[]", "FieldValueTooLong", TOO_LONG))
        if old is not None:
            causes += _immutable_causes(obj, old, ("data", "binaryData"))
        return causes


class SecretStrategy(Strategy):
    model = "V1Secret"

    def decode_body(self, body: object, strict: bool) -> tuple[dict[str, Any], list[str]]:
        obj, warnings = super().decode_body(body, strict)
        _decode_values(self, obj, "data")
        return obj, warnings

    def prepare_create(self, obj: dict[str, Any]) -> None:
        self._fold_string_data(obj)
        obj["type"] = obj.get("type") or SECRET_TYPE_OPAQUE

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        self._fold_string_data(new)
        new["type"] = new.get("type") or old.get("type") or SECRET_TYPE_OPAQUE

    @staticmethod
    def _fold_string_data(obj: dict[str, Any]) -> None:
        """stringData is write-only: its values replace data's under the same keys, then it is dropped."""
        string_data = obj.pop("stringData", None)
        if string_data:
            data = dict(obj.get("data") or {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        data = obj.get("data") or {}
        causes = _key_causes("data", data)
        if _base64_size(data) > MAX_SIZE:
            causes.append(("data", "FieldValueTooLong", TOO_LONG))
        causes += self._type_causes(obj, data)
        if old is not None:
            if obj.get("type") != old.get("type"):
                shown = value_repr(obj.get("type"))
                causes.append(("type", "FieldValueInvalid", f"Invalid value: {shown}: field is immutable"))
            causes += _immutable_causes(obj, old, ("data",))
        return causes

    @staticmethod
    def _type_causes(obj: Mapping[str, Any], data: Mapping[str, str]) -> list[Cause]:
        kind = obj.get("type")

        def required(key: str) -> Cause:
            return (f"data[{key}]", "FieldValueRequired", "Required value")

        if kind == SERVICE_ACCOUNT_TOKEN:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
                field = f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]"
                return [(field, "FieldValueRequired", "Required value")]
        elif kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
            key = ".dockercfg" if kind.endswith("dockercfg") else ".dockerconfigjson"
            if key not in data:
                return [required(key)]
        elif kind == "kubernetes.io/basic-auth":
            if "username" not in data and "password" not in data:
                return [required("username"), required("password")]
        elif kind == "kubernetes.io/ssh-auth":
            if not data.get("ssh-privatekey"):
                return [required("ssh-privatekey")]
        elif kind == "kubernetes.io/tls":
            return [required(key) for key in ("tls.crt", "tls.key") if key not in data]
        return []

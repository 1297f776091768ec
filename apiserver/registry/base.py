"""What every resource shares: object metadata on create and update, names, and the Strategy hooks.

A `Strategy` is kube's RESTCreateStrategy/RESTUpdateStrategy/RESTDeleteStrategy for one
resource: defaults and reset status on create, validation (422), what a main-resource update
and a `/status` update may change, the selectable fields, and the grace of a delete.
The REST handlers call these hooks in kube's order; the hooks never touch storage.
"""

from __future__ import annotations

import datetime
import os
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from apiserver.registry.schema import DecodeError, decode, format_time
from apiserver.resources import ResourceInfo
from apiserver.status import bad_request, invalid
from kubenode.model.resources import is_dns1123_label, is_dns1123_subdomain, qualified_name_problem

Clock = Callable[[], datetime.datetime]
Cause = tuple[str, str, str]  # field, reason, message

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # kube's generateName alphabet (no vowels, no 0/1/3)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


# Seeded once from the OS: uuid.uuid4() reads /dev/urandom on every call, a syscall that drops the GIL
# and then waits for the SQLite writer thread to hand it back (a few ms on a busy server).
_uid_random = random.Random(os.urandom(32))


_VERSION_BITS = ~(0xF000 << 64) & ~(0xC000 << 48)  # the bits RFC 4122 fixes: version and variant
_VERSION_4 = (0x4000 << 64) | (0x8000 << 48)


def new_uid() -> str:
    """A random (version 4) UUID, as kube gives every object (formatted here: uuid.UUID's init and str
    cost 3x as much, twice per scheduled pod)."""
    text = f"{_uid_random.getrandbits(128) & _VERSION_BITS | _VERSION_4:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def generate_name(base: str) -> str:
    """kube's SimpleNameGenerator: the base cut to 58 characters plus 5 random characters."""
    return base[:58] + "".join(random.choice(_NAME_ALPHABET) for _ in range(5))


def value_repr(value: object) -> str:
    """How field.Invalid prints a value: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Strategy:
    """Defaults for a resource without special rules; subclasses override the hooks they need."""

    info: ResourceInfo
    model: str = ""  # the kubernetes.client model name, e.g. "V1Pod"
    field_labels: tuple[str, ...] = ()  # selectable fields besides metadata.name/namespace
    has_status: bool = False  # a /status subresource: main updates keep status, status updates keep spec
    name_is_label: bool = False  # namespaces: DNS-1123 label, not subdomain
    default_propagation = "Background"  # a DELETE's propagationPolicy when it names none
    # kube's Store.ReturnDeletedObject: a DELETE that removes the object answers the object (as it was
    # last stored), not a Status. The OpenAPI of those kinds, and so every generated client, expects it.
    returns_deleted_object = False

    def __init__(self, info: ResourceInfo, clock: Clock = utc_now) -> None:
        self.info = info
        self.clock = clock

    # -- hooks ------------------------------------------------------------------------------------------

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        return {}

    def prepare_create(self, obj: dict[str, Any]) -> None:
        pass

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        return []

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        if self.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)

    def prepare_status_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        """A /status write changes only status (and labels/annotations): spec and lifecycle stay."""
        if "spec" in old:
            new["spec"] = old["spec"]
        else:
            new.pop("spec", None)
        new["metadata"] = {
            **new.get("metadata", {}),
            **{
                k: v
                for k, v in old.get("metadata", {}).items()
                if k in ("deletionTimestamp", "ownerReferences")
            },
        }

    def delete_grace(self, obj: Mapping[str, Any], requested: int | None) -> int:
        """Seconds of graceful deletion; 0 deletes at once (only pods are graceful)."""
        return 0

    # -- shared steps -----------------------------------------------------------------------------------

    @property
    def fields(self) -> tuple[str, ...]:
        return ("metadata.name", "metadata.namespace", *self.field_labels)

    def decode_body(self, body: object, strict: bool) -> tuple[dict[str, Any], list[str]]:
        """Type-check the body against the client's model; unknown fields: 400 if strict, else warnings."""
        if not isinstance(body, Mapping):
            raise bad_request(f"the object provided is unrecognized (must be of type {self.info.kind})")
        kind = body.get("kind")
        api_version = body.get("apiVersion")
        if kind not in (None, "", self.info.kind) or api_version not in (None, "", self.info.group_version):
            raise bad_request(
                f"the object provided is unrecognized (must be of type {self.info.kind}): "
                f"kind {kind!r} in version {api_version!r}"
            )
        try:
            obj, unknown = decode(body, self.model)
        except DecodeError as exc:
            raise bad_request(
                f'{self.info.kind} in version "{self.info.version}" cannot be handled as a {self.info.kind}: '
                f"{exc.path}: {exc}"
            ) from None
        if unknown and strict:
            joined = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise bad_request(f"strict decoding error: {joined}")
        obj["kind"] = self.info.kind
        obj["apiVersion"] = self.info.group_version
        return obj, [f'unknown field "{path}"' for path in unknown]

    def check_name(self, name: str) -> list[Cause]:
        if not name:
            return [
                ("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")
            ]
        if self.name_is_label:
            if not is_dns1123_label(name):
                return [
                    (
                        "metadata.name",
                        "FieldValueInvalid",
                        f"Invalid value: {value_repr(name)}: {LABEL_MESSAGE}",
                    )
                ]
        elif not is_dns1123_subdomain(name):
            return [
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f"Invalid value: {value_repr(name)}: {SUBDOMAIN_MESSAGE}",
                )
            ]
        return []

    def check_metadata(self, meta: Mapping[str, Any]) -> list[Cause]:
        causes: list[Cause] = []
        for key, value in (meta.get("labels") or {}).items():
            problem = qualified_name_problem(str(key))
            if problem:
                causes.append(
                    ("metadata.labels", "FieldValueInvalid", f"Invalid value: {value_repr(key)}: {problem}")
                )
            # kube's content.IsLabelValue: the length and the character set, each its own cause
            text = value if isinstance(value, str) else ""
            if len(text.encode()) > 63:
                causes.append(
                    (
                        "metadata.labels",
                        "FieldValueInvalid",
                        f"Invalid value: {value_repr(value)}: {LABEL_VALUE_LONG}",
                    )
                )
            if not isinstance(value, str) or not _LABEL_VALUE.match(value):
                causes.append(
                    (
                        "metadata.labels",
                        "FieldValueInvalid",
                        f"Invalid value: {value_repr(value)}: {LABEL_VALUE_MESSAGE}",
                    )
                )
        annotations = meta.get("annotations") or {}
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > ANNOTATIONS_MAX_BYTES:  # kube's ValidateAnnotations: keys and values together
            causes.append(
                (
                    "metadata.annotations",
                    "FieldValueTooLong",
                    f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
                )
            )
        for key in annotations:
            problem = qualified_name_problem(str(key))
            if problem:
                causes.append(
                    (
                        "metadata.annotations",
                        "FieldValueInvalid",
                        f"Invalid value: {value_repr(key)}: {problem}",
                    )
                )
        return causes

    def raise_invalid(self, name: str, causes: list[Cause]) -> None:
        if causes:
            raise invalid(self.info.kind, name, causes, self.info.group)

    def new_metadata(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        """Server-set metadata on create (uid, creationTimestamp, namespace); drops what clients may not."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(str(meta["generateName"]))
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = format_time(self.clock())
        if self.info.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        if "generation" in meta or self.info.kind == "Pod":
            meta["generation"] = 1
        result: dict[str, Any] = meta
        return result

    def keep_metadata(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        """On update the server keeps identity and lifecycle fields whatever the client sent."""
        meta = new.setdefault("metadata", {})
        old_meta = old.get("metadata", {})
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
        ):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"]
            if self.has_status and new.get("spec") != old.get("spec"):
                meta["generation"] = int(old_meta["generation"]) + 1


ANNOTATIONS_MAX_BYTES = 256 * 1024  # kube's TotalAnnotationSizeLimitB
LABEL_VALUE_LONG = "must be no more than 63 bytes"
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")

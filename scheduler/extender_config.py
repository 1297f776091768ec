"""`extenders:` of a KubeSchedulerConfiguration (v1), with kube-scheduler's field names and checks.

Each entry: urlPrefix, filterVerb, prioritizeVerb, bindVerb, weight, enableHTTPS,
tlsConfig{insecure, serverName, certFile, keyFile, caFile, caData}, httpTimeout (a Go
duration such as "5s" or "300ms"; 0 or absent means kube's 5 s), nodeCacheCapable,
managedResources[{name, ignoredByScheduler}], ignorable. As kube's validation: weight must
be positive where prioritizeVerb is set, at most one extender may bind, managed resources
must be extended resources and listed once. preemptVerb is refused (kubenode does not call
extenders during preemption) rather than silently ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubenode.model.fields import Fields
from kubenode.model.resources import is_extended_resource_name

DEFAULT_HTTP_TIMEOUT = 5.0  # kube's DefaultExtenderTimeout
FIELDS = (
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "preemptVerb",
    "bindVerb",
    "weight",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
)
TLS_FIELDS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "caData")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float | None:
    """Go's time.ParseDuration for non-negative values ("1m30s", "250ms", "0"), in seconds; None if bad."""
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total if text else None


@dataclass(frozen=True)
class ExtenderTLS:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    ca_data: str = ""  # PEM text (kube's caData is base64 of it in JSON; YAML gives either)


@dataclass(frozen=True)
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    tls: ExtenderTLS = ExtenderTLS()
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    node_cache_capable: bool = False
    managed_resources: tuple[ManagedResource, ...] = ()
    ignorable: bool = False

    @property
    def ignored_resources(self) -> frozenset[str]:
        """Resources kube-scheduler's NodeResourcesFit leaves to this extender."""
        return frozenset(r.name for r in self.managed_resources if r.ignored_by_scheduler)


def _ca_data(tls: Fields) -> str:
    text = tls.string("caData")
    if not text or "-----BEGIN" in text:
        return text
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        raise tls.error("caData", "must be PEM text or base64 of it") from None


def _tls(reader: Fields) -> ExtenderTLS:
    tls = reader.child("tlsConfig", allowed=TLS_FIELDS)
    config = ExtenderTLS(
        insecure=tls.boolean("insecure"),
        server_name=tls.string("serverName"),
        cert_file=tls.string("certFile"),
        key_file=tls.string("keyFile"),
        ca_file=tls.string("caFile"),
        ca_data=_ca_data(tls),
    )
    if bool(config.cert_file) != bool(config.key_file):
        raise tls.error("certFile", "certFile and keyFile must be given together")
    return config


def _timeout(reader: Fields) -> float:
    value = reader.data.get("httpTimeout")
    if value is None:
        return DEFAULT_HTTP_TIMEOUT
    seconds = parse_duration(value) if isinstance(value, str) else None
    if seconds is None:
        raise reader.error("httpTimeout", f"must be a duration such as 5s or 300ms, got {value!r}")
    return seconds or DEFAULT_HTTP_TIMEOUT  # kube: a zero timeout means the default


def _managed(reader: Fields) -> tuple[ManagedResource, ...]:
    resources: list[ManagedResource] = []
    for entry in reader.children("managedResources", allowed=("name", "ignoredByScheduler")):
        name = entry.string("name")
        if not is_extended_resource_name(name):
            raise entry.error("name", f"{name!r} is not a valid extended resource name")
        if any(r.name == name for r in resources):
            raise entry.error("name", f"duplicate managed resource {name!r}")
        resources.append(ManagedResource(name, entry.boolean("ignoredByScheduler")))
    return tuple(resources)


def _extender(reader: Fields) -> ExtenderConfig:
    url = reader.string("urlPrefix")
    if not url:
        raise reader.error("urlPrefix", "must be set")
    if reader.has("preemptVerb"):
        raise reader.error("preemptVerb", "not supported: kubenode does not call extenders in preemption")
    config = ExtenderConfig(
        url_prefix=url.rstrip("/"),
        filter_verb=reader.string("filterVerb"),
        prioritize_verb=reader.string("prioritizeVerb"),
        bind_verb=reader.string("bindVerb"),
        weight=reader.integer("weight", 0),
        enable_https=reader.boolean("enableHTTPS"),
        tls=_tls(reader),
        http_timeout=_timeout(reader),
        node_cache_capable=reader.boolean("nodeCacheCapable"),
        managed_resources=_managed(reader),
        ignorable=reader.boolean("ignorable"),
    )
    if config.prioritize_verb and config.weight <= 0:
        raise reader.error("weight", f"must be a positive integer with prioritizeVerb, got {config.weight}")
    if not url.startswith(("http://", "https://")):
        raise reader.error("urlPrefix", f"must be an http:// or https:// URL, got {url!r}")
    return config


def parse_extenders(top: Fields) -> tuple[ExtenderConfig, ...]:
    """The `extenders` list of a configuration file (empty if absent)."""
    extenders = tuple(_extender(entry) for entry in top.children("extenders", allowed=FIELDS))
    binders = [i for i, e in enumerate(extenders) if e.bind_verb]
    if len(binders) > 1:
        raise top.error(f"extenders[{binders[1]}].bindVerb", "only one extender can implement bind")
    return extenders

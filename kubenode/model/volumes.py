"""Pod volumes, container volumeMounts and envFrom: the parts of a pod spec the agent's volume manager reads.

`parse_volumes(spec)` reads `spec.volumes`, `parse_mounts(container)` a container's `volumeMounts` and
`parse_env_from(container)` its `envFrom`, strictly (unknown fields are errors) but only with the
checks kube's validation makes itself, since the API server validates pods with this model too. A
volume of a type the agent does not mount (persistentVolumeClaim, nfs, ...) is kept with its type
name so the volume manager can say which one it cannot set up.

Volume kinds: emptyDir (medium, sizeLimit), hostPath (path, type), and the projected kinds configMap,
secret, downwardAPI and projected, which all become a list of `Projection`s (a configMap volume is a
projected volume of one configMap source) with the volume's defaultMode; a projected volume's
serviceAccountToken sources (audience, expirationSeconds, path) are Projections too.
"""

from __future__ import annotations

from kubenode.model.errors import echo
from kubenode.model.fields import Fields
from kubenode.model.objects import (
    CONFIG_MAP,
    DEFAULT_MODE,
    DOWNWARD_API,
    EMPTY_DIR,
    HOST_PATH,
    PROJECTED,
    SECRET,
    SERVICE_ACCOUNT_TOKEN,
    EnvFromSource,
    KeyToPath,
    Projection,
    Volume,
    VolumeMount,
)
from kubenode.model.quantity import QuantityError, to_amount
from kubenode.model.resources import is_dns1123_label

HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)


def _mode(obj: Fields, key: str) -> int | None:
    if not obj.has(key):
        return None
    mode = obj.integer(key, 0)
    if not 0 <= mode <= 0o777:
        raise obj.error(
            key, f"Invalid value: {mode}: must be a number between 0 and 0777 (octal), both inclusive"
        )
    return mode


def _relative_path(obj: Fields, key: str) -> str:
    """A file path inside a volume: relative, no '..' element (kube's validateLocalDescendingPath)."""
    path = obj.string(key)
    if not path:
        raise obj.error(key, "Required value")
    if path.startswith("/"):
        raise obj.error(key, f"Invalid value: {echo(path)}: must be a relative path")
    if ".." in path.split("/"):
        raise obj.error(key, f"Invalid value: {echo(path)}: must not contain '..'")
    return path


def _key_items(source: Fields) -> tuple[KeyToPath, ...]:
    items = []
    for item in source.children("items", "V1KeyToPath"):
        if not item.string("key"):
            raise item.error("key", "Required value")
        items.append(KeyToPath(_relative_path(item, "path"), item.string("key"), _mode(item, "mode")))
    return tuple(items)


def _downward_items(source: Fields) -> tuple[KeyToPath, ...]:
    items = []
    for item in source.children("items", "V1DownwardAPIVolumeFile"):
        path = _relative_path(item, "path")
        field_path = None
        resource_field = None
        if item.has("fieldRef"):
            field_path = item.child("fieldRef", "V1ObjectFieldSelector").string("fieldPath")
        elif item.has("resourceFieldRef"):
            ref = item.child("resourceFieldRef", "V1ResourceFieldSelector")
            resource_field = (
                ref.string("containerName"),
                ref.string("resource"),
                str(ref.data.get("divisor", "1")),
            )
        else:
            raise item.error("fieldRef", "Required value: one of fieldRef and resourceFieldRef")
        items.append(
            KeyToPath(path, mode=_mode(item, "mode"), field_path=field_path, resource_field=resource_field)
        )
    return tuple(items)


def _config_projection(kind: str, source: Fields) -> Projection:
    name = source.string("secretName" if kind == SECRET and "secretName" in source.data else "name")
    return Projection(kind, name, _key_items(source), source.boolean("optional"))


_VOLUME_MODELS = {
    CONFIG_MAP: "V1ConfigMapVolumeSource",
    SECRET: "V1SecretVolumeSource",
    DOWNWARD_API: "V1DownwardAPIVolumeSource",
}
_PROJECTION_MODELS = {
    CONFIG_MAP: "V1ConfigMapProjection",
    SECRET: "V1SecretProjection",
    DOWNWARD_API: "V1DownwardAPIProjection",
}


TOKEN_FIELDS = ("audience", "expirationSeconds", "path")  # V1ServiceAccountTokenProjection
MIN_TOKEN_SECONDS = 600  # kube's validation of serviceAccountToken.expirationSeconds
MAX_TOKEN_SECONDS = 1 << 32


def _token_projection(source: Fields) -> Projection:
    seconds = source.integer("expirationSeconds", 3600)
    if seconds < MIN_TOKEN_SECONDS:
        raise source.error(
            "expirationSeconds", f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"
        )
    if seconds > MAX_TOKEN_SECONDS:
        raise source.error(
            "expirationSeconds",
            f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds",
        )
    path = _relative_path(source, "path")
    return Projection(
        SERVICE_ACCOUNT_TOKEN,
        items=(KeyToPath(path),),
        audience=source.string("audience"),
        expiration_seconds=seconds,
    )


def _projections(volume: Fields, kind: str) -> tuple[tuple[Projection, ...], int]:
    if kind == PROJECTED:
        projected = volume.child(PROJECTED, "V1ProjectedVolumeSource")
        found = []
        for source in projected.children("sources", "V1VolumeProjection"):
            if source.has(SERVICE_ACCOUNT_TOKEN):
                found.append(_token_projection(source.child(SERVICE_ACCOUNT_TOKEN, allowed=TOKEN_FIELDS)))
            for sub in (CONFIG_MAP, SECRET, DOWNWARD_API):
                if source.has(sub):
                    child = source.child(sub, _PROJECTION_MODELS[sub])
                    found.append(
                        Projection(sub, items=_downward_items(child))
                        if sub == DOWNWARD_API
                        else _config_projection(sub, child)
                    )
        mode = _mode(projected, "defaultMode")
        return tuple(found), DEFAULT_MODE if mode is None else mode
    source = volume.child(kind, _VOLUME_MODELS[kind])
    projection = (
        Projection(kind, items=_downward_items(source))
        if kind == DOWNWARD_API
        else _config_projection(kind, source)
    )
    mode = _mode(source, "defaultMode")
    return (projection,), DEFAULT_MODE if mode is None else mode


def _volume(volume: Fields) -> Volume:
    name = volume.string("name")
    if not is_dns1123_label(name):
        raise volume.error("name", f"must be a lowercase RFC 1123 label, got {echo(name)}")
    kinds = [k for k, v in volume.data.items() if k != "name" and v is not None]
    if len(kinds) != 1:
        raise volume.error(
            "name", "must specify exactly one volume type" if kinds else "must specify a volume type"
        )
    kind = str(kinds[0])
    if kind == EMPTY_DIR:
        empty = volume.child(EMPTY_DIR, "V1EmptyDirVolumeSource")
        size_limit = None
        if empty.has("sizeLimit"):
            try:
                size_limit = to_amount("memory", empty.data["sizeLimit"])
            except QuantityError as exc:
                raise empty.error("sizeLimit", str(exc)) from None
        return Volume(name, kind, medium=empty.string("medium"), size_limit=size_limit)
    if kind == HOST_PATH:
        host = volume.child(HOST_PATH, "V1HostPathVolumeSource")
        path_type = host.string("type")
        if path_type not in HOST_PATH_TYPES:
            raise host.error("type", f"Unsupported value: {echo(path_type)}")
        if not host.string("path"):
            raise host.error("path", "Required value")
        return Volume(name, kind, path=host.string("path"), host_path_type=path_type)
    if kind in (CONFIG_MAP, SECRET, DOWNWARD_API, PROJECTED):
        projections, mode = _projections(volume, kind)
        return Volume(name, kind, projections=projections, default_mode=mode)
    return Volume(name, kind)


def parse_volumes(spec: Fields) -> tuple[Volume, ...]:
    volumes = tuple(_volume(v) for v in spec.children("volumes", "V1Volume"))
    seen: set[str] = set()
    for volume in volumes:
        if volume.name in seen:
            raise spec.error("volumes", f"Duplicate value: {echo(volume.name)}")
        seen.add(volume.name)
    return volumes


def parse_mounts(container: Fields) -> tuple[VolumeMount, ...]:
    mounts = []
    for mount in container.children("volumeMounts", "V1VolumeMount"):
        if not mount.string("name"):
            raise mount.error("name", "Required value")
        if not mount.string("mountPath"):
            raise mount.error("mountPath", "Required value")
        sub_path = mount.string("subPath")
        if sub_path:
            if sub_path.startswith("/"):
                raise mount.error("subPath", f"Invalid value: {echo(sub_path)}: must be a relative path")
            if ".." in sub_path.split("/"):
                raise mount.error("subPath", f"Invalid value: {echo(sub_path)}: must not contain '..'")
        mounts.append(
            VolumeMount(mount.string("name"), mount.string("mountPath"), mount.boolean("readOnly"), sub_path)
        )
    return tuple(mounts)


def parse_env_from(container: Fields) -> tuple[EnvFromSource, ...]:
    result = []
    for source in container.children("envFrom", "V1EnvFromSource"):
        prefix = source.string("prefix")
        if source.has("configMapRef"):
            ref = source.child("configMapRef", "V1ConfigMapEnvSource")
            result.append(EnvFromSource("configmaps", ref.string("name"), prefix, ref.boolean("optional")))
        elif source.has("secretRef"):
            ref = source.child("secretRef", "V1SecretEnvSource")
            result.append(EnvFromSource("secrets", ref.string("name"), prefix, ref.boolean("optional")))
        else:
            raise source.error("configMapRef", "Required value: one of configMapRef and secretRef")
    return tuple(result)

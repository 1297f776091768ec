"""The named checks. Each takes a Target and returns a PASS detail, or raises Fail or Skip with the reason."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from conformance.target import Fail, Skip, Target
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import (
    API_VERSION,
    HEALTH_VALUES,
    HEALTHY,
    MAX_DEVICE_ID_LENGTH,
    SUPPORTED_VERSIONS,
    is_plugin_endpoint,
)
from kubenode.deviceplugin_client import rpc_error_text
from kubenode.model.resources import extended_resource_name_problem, qualified_name_problem

UNKNOWN_ID = "kubenode-conformance-no-such-device"
CONCURRENT_CALLS = 16
# CDI fully qualified device name: vendor/class=name.
CDI_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*=[A-Za-z0-9_.:-]+$")


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Target], str]
    about: str


# ----- Register ------------------------------------------------------------------------------------


def register_version(t: Target) -> str:
    if t.event.version not in SUPPORTED_VERSIONS:
        raise Fail(t.event.error or f"version {t.event.version!r}")
    return f"version {t.event.version}"


def register_resource_name(t: Target) -> str:
    if (problem := extended_resource_name_problem(t.resource)) is not None:
        raise Fail(f'the ResourceName "{t.resource}" is invalid: it {problem}')
    return f"{t.resource} is an extended resource name"


def register_endpoint(t: Target) -> str:
    if not is_plugin_endpoint(t.event.endpoint):
        raise Fail(f"endpoint {t.event.endpoint!r} is not a socket file name inside the dir")
    if not t.socket_path.is_socket():
        raise Fail(f"endpoint {t.event.endpoint} does not exist as a socket in {t.socket_path.parent}")
    return f"{t.event.endpoint}"


def register_serving_first(t: Target) -> str:
    if not t.event.serving_at_register:
        raise Fail(f"nothing accepted connections on {t.event.endpoint} when Register arrived")
    return "the endpoint was serving when Register arrived"


def register_options(t: Target) -> str:
    served = t.options()
    sent = (t.event.request_pre_start_required, t.event.request_preferred_allocation)
    got = (served.pre_start_required, served.get_preferred_allocation_available)
    if sent != got:
        raise Fail(
            f"RegisterRequest.options (pre_start_required={sent[0]}, "
            f"get_preferred_allocation_available={sent[1]}) differ from "
            f"GetDevicePluginOptions ({got[0]}, {got[1]})"
        )
    return f"pre_start_required={got[0]}, get_preferred_allocation_available={got[1]} in both"


# ----- ListAndWatch --------------------------------------------------------------------------------


def law_first_message(t: Target) -> str:
    first = t.first_list()
    return f"{len(first.devices)} devices after {first.seconds * 1000:.0f} ms"


def law_device_ids(t: Target) -> str:
    ids = [d.ID for d in t.first_list().devices]
    if not ids:
        raise Skip("the plugin advertises no device")
    bad = [i for i in ids if not i or len(i) > MAX_DEVICE_ID_LENGTH]
    if bad:
        raise Fail(
            f"device IDs empty or over {MAX_DEVICE_ID_LENGTH} characters: {', '.join(repr(i) for i in bad)}"
        )
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise Fail(f"duplicate device IDs: {', '.join(duplicates)}")
    return f"{len(ids)} unique IDs of at most {MAX_DEVICE_ID_LENGTH} characters"


def law_health(t: Target) -> str:
    devices = t.first_list().devices
    bad = [f"{d.ID}={d.health!r}" for d in devices if d.health not in HEALTH_VALUES]
    if bad:
        raise Fail(f"health must be exactly Healthy or Unhealthy: {', '.join(bad)}")
    healthy = sum(d.health == HEALTHY for d in devices)
    return f"{healthy} Healthy, {len(devices) - healthy} Unhealthy"


def law_topology(t: Target) -> str:
    devices = t.first_list().devices
    problems = []
    for d in devices:
        nodes = [n.ID for n in d.topology.nodes]
        if any(n < 0 for n in nodes):
            problems.append(f"{d.ID}: negative NUMA node {nodes} (omit topology instead of -1)")
        elif len(set(nodes)) != len(nodes):
            problems.append(f"{d.ID}: repeated NUMA node {nodes}")
    if problems:
        raise Fail("; ".join(problems))
    with_topology = sum(bool(d.topology.nodes) for d in devices)
    return f"{with_topology} of {len(devices)} devices report NUMA nodes"


# ----- Allocate ------------------------------------------------------------------------------------


def allocate_one_response_per_request(t: Target) -> str:
    ids = t.healthy_ids()
    requests = [[i] for i in ids[:2]]
    response = t.allocate(*requests)
    if len(response.container_responses) != len(requests):
        raise Fail(f"{len(response.container_responses)} container responses for {len(requests)} requests")
    return f"{len(requests)} responses for {len(requests)} container requests"


def allocate_requested_ids(t: Target) -> str:
    ids = t.healthy_ids()
    for device_id in ids[:64]:
        if len(t.allocate([device_id]).container_responses) != 1:
            raise Fail(f"Allocate of {device_id} answered no single container response")
    t.sample_response()
    return f"each of {min(len(ids), 64)} healthy devices alone and all {len(ids)} together"


def allocate_env_and_paths(t: Target) -> str:
    response = t.sample_response()
    problems = [f"env key {k!r}" for k in response.envs if not _env_key_ok(k)]
    problems += [f"annotation key {k!r}" for k in response.annotations if qualified_name_problem(k)]
    for m in response.mounts:
        problems += [f"mount path {p!r}" for p in (m.container_path, m.host_path) if not _absolute(p)]
    problems += [
        f"device container path {d.container_path!r}"
        for d in response.devices
        if not _absolute(d.container_path)
    ]
    problems += [f"CDI name {c.name!r}" for c in response.cdi_devices if not CDI_NAME.match(c.name)]
    if problems:
        raise Fail("malformed: " + ", ".join(problems))
    return (
        f"{len(response.envs)} envs, {len(response.mounts)} mounts, {len(response.annotations)} annotations, "
        f"{len(response.cdi_devices)} CDI devices"
    )


def allocate_device_specs(t: Target) -> str:
    specs = t.sample_response().devices
    if not specs:
        raise Skip("Allocate returned no device specs")
    problems = []
    for d in specs:
        if not _absolute(d.host_path) or not os.path.exists(d.host_path):
            problems.append(f"host path {d.host_path!r} does not exist")
        if (
            not d.permissions
            or set(d.permissions) - set("rwm")
            or len(set(d.permissions)) != len(d.permissions)
        ):
            problems.append(f"permissions {d.permissions!r} of {d.host_path} (want letters of 'rwm')")
    if problems:
        raise Fail("; ".join(problems))
    return f"{len(specs)} device specs point at existing host paths"


def allocate_unknown_id(t: Target) -> str:
    try:
        t.stub().Allocate(
            api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[UNKNOWN_ID])]
            ),
            timeout=t.limits.rpc,
        )
    except grpc.RpcError as err:
        code = err.code()
        if code in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.CANCELLED,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        ):
            raise Fail(f"Allocate of an unknown ID broke the call: {rpc_error_text(err)}") from None
        _still_serving(t, "after Allocate of an unknown ID")
        return f"rejected with {code.name}"
    raise Fail(f"Allocate of the unknown ID {UNKNOWN_ID!r} succeeded")


def _env_key_ok(key: str) -> bool:
    # Kubernetes accepts printable ASCII without '=' as an env name.
    return bool(key) and "=" not in key and all(" " <= c <= "~" for c in key)


def _absolute(path: str) -> bool:
    return path.startswith("/") and "\0" not in path


def _still_serving(t: Target, when: str) -> None:
    try:
        t.stub().GetDevicePluginOptions(api_pb2.Empty(), timeout=2.0)
    except grpc.RpcError as err:
        raise Fail(f"the plugin stopped serving {when}: {rpc_error_text(err)}") from None


# ----- GetPreferredAllocation ----------------------------------------------------------------------


def preferred_subset(t: Target) -> str:
    available, _, _, answer = t.preferred()
    outside = [i for i in answer if i not in available]
    if outside or len(set(answer)) != len(answer):
        raise Fail(f"answer {answer} is not a subset of the available IDs (outside: {outside})")
    return f"answer {answer} is within the {len(available)} available"


def preferred_must_include(t: Target) -> str:
    _, must, _, answer = t.preferred()
    missing = [i for i in must if i not in answer]
    if missing:
        raise Fail(f"answer {answer} lacks must-include {missing}")
    return f"answer includes {must}"


def preferred_size(t: Target) -> str:
    _, _, size, answer = t.preferred()
    if len(answer) != size:
        raise Fail(f"answer has {len(answer)} IDs, allocation_size was {size}")
    return f"{size} IDs as requested"


# ----- PreStartContainer ---------------------------------------------------------------------------


def prestart_deadline(t: Target) -> str:
    t.require_advertised(t.event.request_pre_start_required, "PreStartContainer", "required in Register")
    started = time.monotonic()
    try:
        t.stub().PreStartContainer(
            api_pb2.PreStartContainerRequest(devices_ids=t.healthy_ids()[:1]), timeout=t.limits.pre_start
        )
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise Fail(f"no answer within the kubelet's {t.limits.pre_start:g} s") from None
        raise Fail(f"PreStartContainer failed: {rpc_error_text(err)}") from None
    return f"answered in {(time.monotonic() - started) * 1000:.0f} ms"


# ----- Robustness ----------------------------------------------------------------------------------


def robustness_concurrent_allocate(t: Target) -> str:
    ids = t.healthy_ids()
    with ThreadPoolExecutor(max_workers=CONCURRENT_CALLS) as pool:
        outcomes = list(pool.map(lambda n: _try_allocate(t, ids[n % len(ids)]), range(CONCURRENT_CALLS)))
    failures = [o for o in outcomes if o]
    if failures:
        raise Fail(f"{len(failures)} of {CONCURRENT_CALLS} concurrent Allocate calls failed: {failures[0]}")
    return f"{CONCURRENT_CALLS} concurrent Allocate calls answered"


def _try_allocate(t: Target, device_id: str) -> str:
    try:
        t.allocate([device_id])
    except Fail as err:
        return str(err)
    return ""


def robustness_stream_disconnect(t: Target) -> str:
    for _ in range(3):
        stream = t.stub().ListAndWatch(api_pb2.Empty(), timeout=t.limits.first_message)
        try:
            next(stream)
        except (grpc.RpcError, StopIteration):
            raise Fail("ListAndWatch did not send a first message") from None
        stream.cancel()  # a client that goes away mid-stream
    _still_serving(t, "after clients left mid-stream")
    again = t.read_first_message()
    return f"3 clients left mid-stream; a new stream got {len(again.devices)} devices"


REGISTER = [
    Check("register.version", register_version, f"Register uses version {API_VERSION}"),
    Check("register.resource_name", register_resource_name, "the resource name is an extended resource name"),
    Check("register.endpoint", register_endpoint, "the endpoint is a socket file name in the dir"),
    Check("register.serving_first", register_serving_first, "the plugin serves before it registers"),
    Check("register.options", register_options, "options equal in Register and GetDevicePluginOptions"),
]
LISTANDWATCH = [
    Check("listandwatch.first_message", law_first_message, "the first message comes promptly"),
    Check(
        "listandwatch.device_ids",
        law_device_ids,
        f"device IDs unique and at most {MAX_DEVICE_ID_LENGTH} characters",
    ),
    Check("listandwatch.health", law_health, "health is exactly Healthy or Unhealthy"),
    Check("listandwatch.topology", law_topology, "topology is well-formed"),
]
ALLOCATE = [
    Check("allocate.one_response_per_request", allocate_one_response_per_request, "one response per request"),
    Check("allocate.requested_ids", allocate_requested_ids, "every healthy ID can be allocated"),
    Check("allocate.env_and_paths", allocate_env_and_paths, "env keys, paths, annotations, CDI names"),
    Check(
        "allocate.device_specs", allocate_device_specs, "device specs: existing host paths, rwm permissions"
    ),
    Check(
        "allocate.unknown_id", allocate_unknown_id, "an unknown ID is rejected and the plugin keeps serving"
    ),
]
PREFERRED = [
    Check("preferred.subset", preferred_subset, "the answer is a subset of the available IDs"),
    Check("preferred.must_include", preferred_must_include, "the answer includes must-include IDs"),
    Check("preferred.size", preferred_size, "the answer has the requested size"),
]
PRESTART = [Check("prestart.deadline", prestart_deadline, "PreStartContainer answers within 30 s")]
ROBUSTNESS = [
    Check("robustness.concurrent_allocate", robustness_concurrent_allocate, "concurrent Allocate calls"),
    Check("robustness.stream_disconnect", robustness_stream_disconnect, "clients leaving mid-stream"),
]
PER_RESOURCE_CHECKS = REGISTER + LISTANDWATCH + ALLOCATE + PREFERRED + PRESTART + ROBUSTNESS
RESTART_CHECK = "kubelet_restart.reregister"
ALL_CHECK_NAMES = [c.name for c in PER_RESOURCE_CHECKS] + [RESTART_CHECK]

"""Images for CRI pods: the kubelet's image manager (pkg/kubelet/images) with its pull policy and backoff.

Flow of `ImagePuller.ensure(pod, container)`: the reference is checked as the kubelet's ParseImageName does
(InvalidImageName) -> the policy (`imagePullPolicy`, or kube's default: Always for `:latest` or no tag,
IfNotPresent otherwise) -> ImageStatus says whether the runtime has it -> Never and absent is
ErrImageNeverPull -> a pull still backing off after an earlier failure is ImagePullBackOff -> PullImage;
a failure is ErrImagePull and starts (or doubles) the backoff: 10 s, doubling, at most 300 s, per pod and
image.
Each failure is an `ImageError` with kube's reason and message, which the runtime shows as the container's
waiting state.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.kuberuntime.cri.client import PULL_TIMEOUT_S, CRIClient, CRIError
from agent.kuberuntime.securitycontext import raw_container
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import Container, Pod

IMAGE_BACKOFF_INITIAL_S = 10.0
IMAGE_BACKOFF_MAX_S = 300.0

# The docker reference grammar (distribution/reference): [domain/]path[:tag][@digest], lowercase path.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$")


@dataclass
class ImageError(Exception):
    reason: str  # ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName
    message: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def is_valid_reference(image: str) -> bool:
    return len(image) <= 255 and bool(_REFERENCE.match(image))


def _tag_of(image: str) -> str:
    if "@" in image:
        return "@digest"
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def pull_policy(pod: Pod, c: Container) -> str:
    """imagePullPolicy as written, or the API server's default for it."""
    written = raw_container(pod, c.name).get("imagePullPolicy")
    if written in ("Always", "IfNotPresent", "Never"):
        return str(written)
    return "Always" if _tag_of(c.image) in ("", "latest") else "IfNotPresent"


class ImagePuller:
    def __init__(self, client: Callable[[], CRIClient], clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._backoff: dict[str, tuple[float, float]] = {}  # key -> (retry not before, current backoff)

    def ensure(self, pod: Pod, c: Container) -> str:
        """The image's ref (id) once present; ImageError when it is not (see the module's flow)."""
        image = c.image
        if not is_valid_reference(image):
            raise ImageError(
                "InvalidImageName",
                f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": '
                "invalid reference format",
            )
        policy = pull_policy(pod, c)
        client = self._client()
        spec = cri.ImageSpec(image=image)
        if policy != "Always":
            status = client.call(client.images.ImageStatus, cri.ImageStatusRequest(image=spec))
            if status.image.id:
                return str(status.image.id)
            if policy == "Never":
                raise ImageError(
                    "ErrImageNeverPull", f'Container image "{image}" is not present with pull policy of Never'
                )
        key = f"{pod.uid}/{image}"
        with self._lock:
            due, _ = self._backoff.get(key, (0.0, 0.0))
        if self._clock() < due:
            raise ImageError("ImagePullBackOff", f'Back-off pulling image "{image}"')
        try:
            pulled = client.call(
                client.images.PullImage, cri.PullImageRequest(image=spec), timeout=PULL_TIMEOUT_S
            )
        except CRIError as exc:
            if exc.unavailable:
                raise  # the runtime itself is gone (a registry failure comes back as UNKNOWN)
            with self._lock:
                _, current = self._backoff.get(key, (0.0, 0.0))
                current = min(IMAGE_BACKOFF_MAX_S, current * 2) if current else IMAGE_BACKOFF_INITIAL_S
                self._backoff[key] = (self._clock() + current, current)
            raise ImageError("ErrImagePull", str(exc)) from None
        with self._lock:
            self._backoff.pop(key, None)
        return str(pulled.image_ref)

    def user(self, image_ref: str) -> tuple[int | None, str]:
        """The image's user as the kubelet's getImageUser reads it from ImageStatus: (uid, "") when it is
        numeric, (None, name) when it is a name, (0, "") when the image names none (it runs as root)."""
        client = self._client()
        spec = cri.ImageSpec(image=image_ref)
        image = client.call(client.images.ImageStatus, cri.ImageStatusRequest(image=spec))
        if image.image.HasField("uid"):
            return int(image.image.uid.value), ""
        if image.image.username:
            return None, str(image.image.username)
        return 0, ""

    def retry_in(self, pod: Pod, image: str) -> float:
        with self._lock:
            due, _ = self._backoff.get(f"{pod.uid}/{image}", (0.0, 0.0))
        return max(0.0, due - self._clock())

    def forget(self, uid: str) -> None:
        with self._lock:
            for key in [k for k in self._backoff if k.startswith(f"{uid}/")]:
                del self._backoff[key]

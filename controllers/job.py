"""The Job controller (kube's pkg/controller/job) and its ttlSecondsAfterFinished clean-up.

Flow of `sync(namespace/name)`:
1. A finished Job (Complete or Failed) only waits for ttlSecondsAfterFinished, then is deleted in the
   background (kube's TTL-after-finished controller).
2. Claim pods (as the ReplicaSet controller). succeeded/failed count the pods that ended (never fewer
   than status already says, so a pod deleted after it ended still counts); with restartPolicy
   OnFailure the restarts of the active pods count as failures too, as kube counts them.
3. The Job fails (FailureTarget, then Failed: BackoffLimitExceeded or DeadlineExceeded, the
   conditions `kubectl wait --for=condition=failed` reads) once failures exceed backoffLimit or it
   has been active longer than activeDeadlineSeconds; it completes (SuccessCriteriaMet, then
   Complete) once `completions` pods succeeded (or, without completions, one succeeded and none is
   active). Either way its remaining pods are deleted.
4. Otherwise it keeps min(parallelism, completions - succeeded) pods active (none while suspended);
   after a failure a new pod waits kube's backoff: 10 s doubling per failure, at most 6 min.
5. Status: active, ready, succeeded, failed, startTime, completionTime, conditions.
"""

from __future__ import annotations

import contextlib
from typing import Any

from controllers.framework import Obj, meta
from controllers.pods import deletion_rank, is_active, is_ready, seconds
from controllers.replicaset import BURST_REPLICAS, PodOwnerController
from controllers.resources import JOBS
from kubenode.kubeclient import NotFound
from kubenode.kubeclient.timefmt import rfc3339

BACKOFF_BASE_S = 10.0
BACKOFF_MAX_S = 360.0


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
        "reason": reason, "message": message,
    }  # fmt: skip


def finished(job: Obj) -> str:
    """ "Complete" or "Failed" when the Job has finished, else ""."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return ""


def _finished_at(pod: Obj) -> float | None:
    stamps = [
        seconds(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    return max((s for s in stamps if s is not None), default=None)


class JobController(PodOwnerController):
    name = "job"
    resource = JOBS

    def sync(self, key: str) -> None:
        job = self.owners.get(key)
        if job is None:
            self.expectations.forget(key)
            return
        if finished(job):
            self._expire(job)
            return
        spec = job.get("spec") or {}
        status: dict[str, Any] = dict(job.get("status") or {})
        now = self.clock()
        pods = self.claimed_pods(job)
        active = [p for p in pods if is_active(p)]
        succeeded = max(int(status.get("succeeded") or 0), sum(1 for p in pods if _phase(p) == "Succeeded"))
        failed_pods = [p for p in pods if _phase(p) == "Failed"]
        failed = max(int(status.get("failed") or 0), len(failed_pods))
        restarts = 0
        if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            restarts = sum(int(cs.get("restartCount") or 0) for p in active
                           for cs in (p.get("status") or {}).get("containerStatuses") or [])  # fmt: skip
        if not status.get("startTime") and not spec.get("suspend"):
            status["startTime"] = rfc3339(now)
        started = seconds(status.get("startTime"))
        deadline = spec.get("activeDeadlineSeconds")
        stamp = rfc3339(now)
        completions = spec.get("completions")
        outcome: list[dict[str, Any]] = []
        if failed + restarts > int(spec.get("backoffLimit", 6)):
            message = "Job has reached the specified backoff limit"
            outcome = [
                _condition(kind, "BackoffLimitExceeded", message, stamp)
                for kind in ("FailureTarget", "Failed")
            ]
        elif deadline is not None and started is not None and started + int(deadline) <= now:
            message = "Job was active longer than specified deadline"
            outcome = [
                _condition(kind, "DeadlineExceeded", message, stamp) for kind in ("FailureTarget", "Failed")
            ]
        elif (completions is not None and succeeded >= int(completions)) or (
            completions is None and succeeded > 0 and not active
        ):
            message = "Reached expected number of succeeded pods"
            outcome = [
                _condition(kind, "CompletionsReached", message, stamp)
                for kind in ("SuccessCriteriaMet", "Complete")
            ]
            status["completionTime"] = stamp
        if outcome:
            final = outcome[-1]
            done = final["type"] == "Complete"
            reason = "Completed" if done else str(final["reason"])
            self.event(job, reason, str(final["message"]), "Normal" if done else "Warning")
            if active:
                self.delete_pods(key, active)
            active = []
            status["conditions"] = [*(status.get("conditions") or []), *outcome]
        elif self.expectations.satisfied(key):
            active = self._manage(key, job, active, succeeded, failed_pods, now)
            if deadline is not None and started is not None:
                self.queue.add_after(key, started + int(deadline) - now)
        ready = sum(1 for p in active if is_ready(p))
        status.update(active=len(active), ready=ready, succeeded=succeeded, failed=failed)
        self.write_status(job, status)
        if outcome:
            self._expire({**job, "status": status})

    def _manage(
        self, key: str, job: Obj, active: list[Obj], succeeded: int, failed: list[Obj], now: float
    ) -> list[Obj]:
        spec = job.get("spec") or {}
        completions = spec.get("completions")
        wanted = int(spec.get("parallelism", 1))
        if completions is not None:
            wanted = min(wanted, int(completions) - succeeded)
        elif succeeded:
            wanted = 0
        if spec.get("suspend"):
            wanted = 0
        if len(active) > wanted:
            doomed = sorted(active, key=deletion_rank)[: len(active) - wanted]
            self.delete_pods(key, doomed)
            return [p for p in active if p not in doomed]
        if len(active) < wanted:
            if failed:
                last = max((_finished_at(p) or now for p in failed), default=now)
                delay = min(BACKOFF_BASE_S * 2 ** (len(failed) - 1), BACKOFF_MAX_S)
                if last + delay > now:
                    self.queue.add_after(key, last + delay - now)
                    return active
            self.create_pods(key, job, min(wanted - len(active), BURST_REPLICAS), spec.get("template") or {})
        return active

    def _expire(self, job: Obj) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        status = job.get("status") or {}
        ends = [
            seconds(c.get("lastTransitionTime"))
            for c in status.get("conditions") or []
            if c.get("type") in ("Complete", "Failed")
        ]
        end = seconds(status.get("completionTime")) or max((e for e in ends if e is not None), default=None)
        if end is None:
            return
        remaining = end + int(ttl) - self.clock()
        if remaining > 0:
            self.queue.add_after(f"{meta(job).get('namespace')}/{meta(job).get('name')}", remaining)
            return
        with contextlib.suppress(NotFound):
            self.client.delete(JOBS, meta(job)["name"], meta(job).get("namespace"), uid=meta(job).get("uid"),
                               propagation_policy="Background")  # fmt: skip


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")

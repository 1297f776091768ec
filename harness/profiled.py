"""`python -m harness.profiled OUT -- KUBENODE-ARGS...`: `kubenode` under cProfile, CPU time of every thread.

cProfile alone sees only the thread that enabled it: a hook installed with `threading.setprofile`
starts one profile in each new thread, timed by that thread's CPU clock (`time.thread_time`), so
a thread waiting on a socket or a lock costs nothing in the profile. When `kubenode` returns (a
daemon returns on SIGTERM), the profiles are merged and written to OUT for `pstats`.
ApiServerProcess starts the API server this way when KUBENODE_APISERVER_PROFILE names OUT.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
import time


def profiled(out: str, argv: list[str]) -> int:
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_thread_profile(*_: object) -> None:
        sys.setprofile(None)  # this hook ran once in the new thread: hand over to cProfile
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()

    threading.setprofile(start_thread_profile)
    main_profile = cProfile.Profile(time.thread_time)
    profiles.append(main_profile)
    from cli.main import main as kubenode_main

    main_profile.enable()
    try:
        return kubenode_main(argv)
    finally:
        main_profile.disable()
        with lock:
            for profile in profiles:
                profile.disable()
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                try:
                    stats.add(profile)
                except TypeError:  # a thread that never ran any Python code
                    continue
        stats.dump_stats(out)


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        print("usage: python -m harness.profiled OUT -- KUBENODE-ARGS...", file=sys.stderr)
        return 2
    return profiled(sys.argv[1], sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())

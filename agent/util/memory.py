"""Keeping the agent's resident memory to what it uses: glibc's malloc arenas and freed heap.

CPython hands objects larger than 512 bytes (most of a pod's JSON, the informer caches' dicts) and all
its C extensions' memory (gRPC's core, OpenSSL) to malloc. glibc keeps what is freed for reuse:
- each thread that allocates may get an arena of its own (up to 8 per core), and the agent has some
  thirty threads; their arenas each keep freed memory the others cannot reuse. Under the GIL the threads
  rarely allocate at the same moment, so two arenas lose nothing: `limit_malloc_arenas` sets
  M_ARENA_MAX once at start, unless the operator's MALLOC_ARENA_MAX environment variable says otherwise;
- free pages inside the heap (a burst of pod syncs leaves many) stay resident until `malloc_trim`
  hands them back (glibc only trims the heap's top by itself): `release_free_memory` does, after
  start and then periodically from the daemon's main loop (about 2 ms of CPU each time).
On a C library without these (musl), both do nothing.
"""

from __future__ import annotations

import logging
import os

from agent.util.libc import LIBC

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
MALLOC_ARENAS = 2
RELEASE_INTERVAL_S = 5.0  # how often the daemon hands freed heap back


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> None:
    """At most `arenas` malloc arenas from now on; call before the threads start."""
    mallopt = getattr(LIBC, "mallopt", None)
    if "MALLOC_ARENA_MAX" not in os.environ and mallopt is not None and not mallopt(M_ARENA_MAX, arenas):
        log.debug("mallopt(M_ARENA_MAX, %d) refused", arenas)


def release_free_memory() -> None:
    """Hand the pages malloc holds free back to the system (glibc's malloc_trim)."""
    trim = getattr(LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)

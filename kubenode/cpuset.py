"""The kernel's CPU list format ("0-3,8,10-11"), as in cpuset.cpus and sysfs cpulist files.

Standard library only and nothing imported at run time: the CDI hook (deviceplugin.cdihook) imports this
module on every container start, under `python -I -S` and from a bundle that ships only the two files.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy treats the name the same)
if TYPE_CHECKING:
    from collections.abc import Iterable


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse a kernel CPU list; raises ValueError naming the bad part."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"bad CPU list entry {part!r} in {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"bad CPU range {part!r} in {text!r}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpuset(cpus: "Iterable[int]") -> str:
    """Format CPUs as a kernel CPU list, merging consecutive runs: {0,1,2,5} -> "0-2,5"."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = prev = None
    for cpu in [*ordered, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)

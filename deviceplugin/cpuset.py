"""The kernel's CPU list format ("0-3,8,10-11"), as in cpuset.cpus and sysfs cpulist files.

The helpers are defined in deviceplugin.cdihook, which must stay one self-contained file (the CDI hook runs
it with `python -I -S`, without this package); everything else imports them from here.
"""

from deviceplugin.cdihook import format_cpuset, parse_cpuset

__all__ = ["format_cpuset", "parse_cpuset"]

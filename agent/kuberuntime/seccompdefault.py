"""The RuntimeDefault seccomp profile: the container runtime's default, as an OCI seccomp profile.

The syscalls are those containerd's default profile allows (contrib/seccomp), with the additions of later
kernels that current runtimes allow as well (close_range, pidfd_*, rseq, landlock_*, ...); clone3 answers
ENOSYS without CAP_SYS_ADMIN, as in current runtimes, so that glibc falls back to clone, which is allowed only
without namespace flags. Syscalls that need a capability are allowed only when the container has it.
"""

from __future__ import annotations

import errno
from typing import Any

_ALWAYS = """
accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown chown32
clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64
clock_nanosleep clock_nanosleep_time64 close close_range connect copy_file_range creat dup dup2 dup3
epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old
eventfd eventfd2 execve execveat exit exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate
fanotify_mark fchdir fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync
fgetxattr flistxattr flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync
ftruncate ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv futex_wake futimesat
getcpu getcwd getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups
getgroups32 getitimer getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid
getresgid32 getresuid getresuid32 getrlimit get_robust_list getrusage getsid getsockname getsockopt
get_thread_area gettid gettimeofday getuid getuid32 getxattr inotify_add_watch inotify_init
inotify_init1 inotify_rm_watch io_cancel ioctl io_destroy io_getevents io_pgetevents
io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit ipc kill landlock_add_rule
landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat listen listxattr
llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64 madvise map_shadow_stack membarrier
memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2 mprotect
mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend mq_timedsend_time64
mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at
nanosleep newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2
pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2 prlimit64
process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink readlinkat
readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr rename renameat
renameat2 restart_syscall rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo
rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity
sched_getattr sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler
sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam
sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop semtimedop_time64 send
sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32
setgroups setgroups32 setitimer setpgid setpriority setregid setregid32 setresgid setresgid32 setresuid
setresuid32 setreuid setreuid32 setrlimit set_robust_list setsid setsockopt set_thread_area
set_tid_address setuid setuid32 setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd
signalfd4 sigprocmask sigreturn socket socketcall socketpair splice stat stat64 statfs statfs64 statx
symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create timer_delete
timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64 timerfd_create
timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate truncate64
ugetrlimit umask uname unlink unlinkat utime utimensat utimensat_time64 utimes vfork vmsplice wait4
waitid waitpid write writev arch_prctl modify_ldt
"""

# Allowed only to a container holding the capability (containerd's and moby's per-capability rules).
_WITH_CAPABILITY: dict[str, str] = {
    "DAC_READ_SEARCH": "open_by_handle_at",
    "SYS_ADMIN": "bpf clone clone3 fanotify_init fsconfig fsmount fsopen fspick lookup_dcookie mount"
    " mount_setattr move_mount open_tree perf_event_open quotactl quotactl_fd setdomainname sethostname setns"
    " syslog umount umount2 unshare",
    "SYS_BOOT": "reboot",
    "SYS_CHROOT": "chroot",
    "SYS_MODULE": "delete_module init_module finit_module",
    "SYS_PACCT": "acct",
    "SYS_PTRACE": "kcmp pidfd_getfd process_madvise process_vm_readv process_vm_writev ptrace",
    "SYS_RAWIO": "iopl ioperm",
    "SYS_TIME": "settimeofday stime clock_settime clock_settime64",
    "SYS_TTY_CONFIG": "vhangup",
    "SYS_NICE": "get_mempolicy mbind set_mempolicy set_mempolicy_home_node",
    "BPF": "bpf",
    "PERFMON": "perf_event_open",
}

# Namespace flags that clone(2) may not carry without CAP_SYS_ADMIN.
_NAMESPACE_FLAGS = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000


def runtime_default_profile(capabilities: frozenset[str]) -> dict[str, Any]:
    """The profile for a container with these capabilities, in the OCI seccomp format."""
    names = set(_ALWAYS.split())
    for capability, extra in _WITH_CAPABILITY.items():
        if capability in capabilities:
            names.update(extra.split())
    syscalls: list[dict[str, Any]] = [{"names": sorted(names), "action": "SCMP_ACT_ALLOW"}]
    # personality(2): only the ordinary persona, PER_LINUX32 and the query.
    for persona in (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF):
        syscalls.append(
            {
                "names": ["personality"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": persona, "op": "SCMP_CMP_EQ"}],
            }
        )
    if "SYS_ADMIN" not in capabilities:
        syscalls.append(
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": _NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
            }
        )
        syscalls.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    return {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": errno.EPERM, "syscalls": syscalls}

"""The library exports the hooked names and nothing else (STYLE: `nm -D` shows no internals)."""

import subprocess

import lib

HOOKS = {
    "read", "write", "readv", "writev", "recv", "send", "recvfrom", "sendto", "recvmsg",
    "sendmsg", "recvmmsg", "sendmmsg", "sendfile", "sendfile64", "poll", "ppoll", "select", "pselect", "connect",
    "socket", "accept",
    "accept4", "getsockopt", "close", "close_range", "closefrom", "dup", "dup2", "dup3", "fcntl",
    "fcntl64", "ioctl", "fclose", "freopen", "freopen64", "__read_chk", "__recv_chk",
    "__recvfrom_chk", "__poll_chk", "__ppoll_chk", "dlopen",
    # CLONE_FILES: timebox's threads must not make a single-threaded program's table shared
    "unshare",
    # event loops: a thread in epoll_wait waits visibly on its instance's governed sockets
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
}
# stdio on a FILE over a governed socket (glibc moves its bytes out of the hooks' sight).
STDIO = {
    "fgets", "fgets_unlocked", "__fgets_chk", "__fgets_unlocked_chk", "fread", "fread_unlocked",
    "__fread_chk", "__fread_unlocked_chk", "fgetc", "getc", "_IO_getc", "fgetc_unlocked",
    "getc_unlocked", "__uflow", "getdelim", "__getdelim", "getline", "fscanf", "vfscanf",
    "__isoc99_fscanf", "__isoc99_vfscanf", "fwrite", "fwrite_unlocked", "fputs",
    "fputs_unlocked", "fputc", "putc", "_IO_putc", "fputc_unlocked", "putc_unlocked",
    "__overflow", "fprintf", "vfprintf", "__fprintf_chk", "__vfprintf_chk", "fflush",
    "fflush_unlocked",
}
HOOKS |= STDIO
# A signal handler's jump out of a governed wait ends the waits its thread recorded.
HOOKS |= {"longjmp", "_longjmp", "siglongjmp", "__longjmp_chk"}
# Name resolution hooks: bounded by phase dns, and they teach hostname rules which addresses a
# name stands for.
RESOLVE = {"getaddrinfo", "gethostbyname", "gethostbyname2", "gethostbyname_r",
           "gethostbyname2_r", "getnameinfo", "gethostbyaddr", "gethostbyaddr_r"}
# The public API (include/timebox.h resolves it at run time).
API = {"timebox_deadline_begin", "timebox_deadline_end", "timebox_remaining_ms"}


def test_only_hooks_are_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", lib.LIB], capture_output=True,
                         text=True, check=True).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    unexpected = names - HOOKS - RESOLVE - API
    assert not unexpected, "exported beyond the hooks: %s" % sorted(unexpected)
    missing = (HOOKS | API) - names
    assert not missing, "hooks not exported: %s" % sorted(missing)

# timebox - one Makefile for the library, the launcher, the tests, the demo and the bench.
#   make                      build/lib/libtimebox.so and build/bin/timebox
#   make test                 unit tests (cmocka), the exports, layers and TLS checks, regress,
#                             stress-short, end-to-end tests, conformance-short
#   make stress               minutes of 200 threads against a fault server (tests/stress/)
#   make conformance          CPython's and GLib's own suites natively and under timebox,
#                             compared test by test (long; a short subset is in make test)
#   make demo                 the fault server against a legacy client, without and with timebox
#   make bench [QUICK=1]      benchmarks against native and a HAProxy sidecar -> docs/benchmarks.md
#   make install [PREFIX=/usr/local] [DESTDIR=...]   and make uninstall
#   make SANITIZE=address     (or undefined, thread) builds into build/san-<name>/ instead
#   make MUSL=1               build/musl/lib/libtimebox-musl.so and a static build/musl/bin/timebox
#                             with musl-gcc (Debian's musl-tools), for Alpine and other musl
#                             systems; libconfig is built from Debian's source package

VERSION   := 0.1.0
CC        ?= cc
SANITIZE  ?=
UNIT_LIMIT ?= 60
BUILD     ?= build
ifneq ($(SANITIZE),)
BUILD     := build/san-$(SANITIZE)
endif
MUSL      ?=
LIB_FILE  := libtimebox.so
ifneq ($(MUSL),)
BUILD     := build/musl
CC        := musl-gcc
LIB_FILE  := libtimebox-musl.so
endif

WARN      := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
             -Wwrite-strings
CFLAGS    ?= -O2 -g
BASE_CFLAGS = -std=c11 -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"' $(WARN) $(CFLAGS) \
             -fPIC -fvisibility=hidden -pthread
# No -lconfig: the library loads libconfig.so.9 when it reads a file (shim/libconfig_dl.c).
LDLIBS_LIB = -ldl -pthread
# The library is linked with link-time optimisation: the runtime calls many small policy
# functions on every governed transfer (a phase's limit, an idle expiry, the budget's step),
# and inlining them across files takes ~100 instructions off each exchange (make bench).
# Fat objects: the unit tests and the launcher link the same objects without it. Not in
# sanitizer builds, whose instrumented code is checked as compiled.
LTO       := -flto=auto -ffat-lto-objects
# musl: Debian's musl-gcc sees only musl's headers; the kernel's (linux/, asm/) are linked
# into build/musl/kinc from linux-libc-dev, and libconfig is musl's own build of it
# (tests/musl_libconfig.sh), linked in statically so that a musl system needs nothing else.
# The launcher is static: one file that runs on any musl or glibc system.
MUSL_LIBCONFIG := $(BUILD)/libconfig/lib/libconfig.a
ifneq ($(MUSL),)
BASE_CFLAGS += -isystem $(BUILD)/kinc -I$(BUILD)/libconfig/include
LDLIBS_LIB = $(MUSL_LIBCONFIG) -pthread
LAUNCHER_LDLIBS := -static $(MUSL_LIBCONFIG)
MUSL_PREREQ := $(MUSL_LIBCONFIG) $(BUILD)/kinc/linux
else
LAUNCHER_LDLIBS := -lconfig
MUSL_PREREQ :=
endif
ifneq ($(SANITIZE),)
BASE_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
SAN_LDFLAGS := -fsanitize=$(SANITIZE)
LTO       :=
endif

# A machine without the build packages stops here with one line that names them and the
# command that installs them, not with a compiler's error. make test, demo and bench first
# install what they need (tests/deps.sh, as root) or name it, then build.
ifeq ($(filter test demo bench deb deps-check deps-test clean,$(MAKECMDGOALS)),)
ifneq ($(MUSL),)
BUILD_MISSING := $(strip \
	$(if $(shell command -v musl-gcc 2>/dev/null),,musl-tools musl-dev) \
	$(if $(wildcard /usr/include/linux/futex.h),,linux-libc-dev) \
	$(if $(shell command -v dpkg-source 2>/dev/null),,dpkg-dev))
else
BUILD_MISSING := $(strip \
	$(if $(shell command -v $(firstword $(CC)) 2>/dev/null),,build-essential) \
	$(shell $(CC) -E -x c -include libconfig.h /dev/null >/dev/null 2>&1 || echo libconfig-dev) \
	$(if $(filter unit,$(MAKECMDGOALS)),$(shell $(CC) -E -x c -include stdarg.h -include \
	stddef.h -include setjmp.h -include cmocka.h /dev/null >/dev/null 2>&1 || echo libcmocka-dev)))
endif
ifneq ($(BUILD_MISSING),)
$(error missing Debian packages: $(BUILD_MISSING); install them with: sudo apt-get install -y $(BUILD_MISSING) (tests/deps.sh check installs all that make test needs))
endif
endif

# Three layers, one folder each, each with its own include path so that a wrong include
# fails to compile (arrows point down only):
#   shim/    libtimebox.so: the hooks and the runtime      -Ishim -Ipolicy -Iinclude
#   policy/  pure modules: no I/O, no dlsym, `now` passed in  -Ipolicy
#   cli/     the launcher and operator's tool               -Icli -Ipolicy
POLICY_SRCS  := $(wildcard policy/*.c)
RUNTIME_SRCS := $(wildcard shim/*.c)
# musl's FILE is opaque (no glibc libio fields, no __uflow): the glibc build's stdio hooks
# move bytes through glibc's buffer pointers; the musl build has its own readers and
# writers, on musl's <stdio_ext.h> (hooks_stdio_musl.c, hooks_stdio_musl_w.c).
ifneq ($(MUSL),)
# Each build has its own stand-ins for what the other libc provides: the musl build an
# atexit (libc_compat.c), the glibc build a libconfig loaded at run time (libconfig_dl.c).
RUNTIME_SRCS := $(filter-out shim/hooks_stdio.c shim/hooks_scanf.c shim/stdio_wait.c \
                shim/libconfig_dl.c,$(RUNTIME_SRCS))
else
RUNTIME_SRCS := $(filter-out shim/hooks_stdio_musl.c shim/hooks_stdio_musl_w.c \
                shim/libc_compat.c,$(RUNTIME_SRCS))
endif
CLI_SRCS     := $(wildcard cli/*.c)
POLICY_OBJS  := $(POLICY_SRCS:%.c=$(BUILD)/obj/%.o)
# Policy the library never calls (the lint and the simulator serve the launcher only).
LIB_POLICY_OBJS := $(filter-out $(BUILD)/obj/policy/lint.o $(BUILD)/obj/policy/plan.o \
                   $(BUILD)/obj/policy/plan_protect.o \
                   $(BUILD)/obj/policy/suggest.o $(BUILD)/obj/policy/suggest_text.o,$(POLICY_OBJS))
RUNTIME_OBJS := $(RUNTIME_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS     := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)

LIB      := $(BUILD)/lib/$(LIB_FILE)
LAUNCHER := $(BUILD)/bin/timebox

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
E2E_C     := $(wildcard tests/e2e/*.c tests/e2e/clients/*.c)
E2E_BINS  := $(patsubst %.c,$(BUILD)/%,$(E2E_C))
REGRESS_C := $(wildcard tests/regress/*.c)
REGRESS_BINS := $(patsubst %.c,$(BUILD)/%,$(REGRESS_C))
BENCH_C   := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst %.c,$(BUILD)/%,$(BENCH_C)) $(BUILD)/tests/bench/idle_thread.so

# Regression programs and end-to-end tests run two at a time: nearly all of them wait on a
# stalled peer, none measures throughput, and each has its own servers on ephemeral ports.
REGRESS_JOBS ?= 2
E2E_JOBS     ?= 2

.PHONY: all test unit regress e2e musl-clients stress stress-short demo bench clean deps-check deps-test install uninstall deb \
	check-exports check-layers check-tls conformance conformance-short

# Installed layout (make install PREFIX=/usr/local DESTDIR=/tmp/stage). The launcher finds
# the library at ../lib/timebox/ from its own directory.
# The Debian package (make deb) sets LIBDIR=/usr/lib/<triplet> and puts the examples under
# /usr/share/doc/timebox/; the launcher looks in both lib/timebox/ and lib/<triplet>/timebox/.
PREFIX     ?= /usr/local
DESTDIR    ?=
LIBDIR     ?= $(PREFIX)/lib
BINDIR     := $(PREFIX)/bin
PKGLIBDIR  := $(LIBDIR)/timebox
INCLUDEDIR := $(PREFIX)/include
PCDIR      := $(LIBDIR)/pkgconfig
MANDIR     := $(PREFIX)/share/man
EXAMPLEDIR ?= $(PREFIX)/share/timebox/examples
EXAMPLES   := $(wildcard conf/*.conf)

all: $(LIB) $(LAUNCHER)

$(BUILD)/obj/policy/%.o: policy/%.c $(wildcard policy/*.h) Makefile | $(MUSL_PREREQ)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LTO) -Ipolicy -c $< -o $@
$(BUILD)/obj/shim/%.o: shim/%.c $(wildcard shim/*.h policy/*.h include/*.h) Makefile | $(MUSL_PREREQ)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LTO) -Ishim -Ipolicy -Iinclude -c $< -o $@
# The launcher takes the packager's CPPFLAGS (fortification); the library cannot: it
# defines the very functions _FORTIFY_SOURCE wraps inline. MULTIARCH names the Debian
# library folder the launcher also searches (lib/<triplet>/timebox/).
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
$(BUILD)/obj/cli/%.o: cli/%.c $(wildcard cli/*.h policy/*.h) Makefile | $(MUSL_PREREQ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BASE_CFLAGS) -DTB_MULTIARCH='"$(MULTIARCH)"' -Icli -Ipolicy -c $< -o $@

# Only the hooks are exported: the version script lists every TB_EXPORT function (and hides
# even the linker's _edata/_end/__bss_start).
$(BUILD)/exports.map: $(RUNTIME_SRCS)
	@mkdir -p $(dir $@)
	@{ echo '{ global:'; grep -ho 'TB_EXPORT[^(]*(' $(RUNTIME_SRCS) | \
	   sed 's/($$//; s/.*[ *]//; s/$$/;/'; echo 'local: *; };'; } > $@

$(LIB): $(LIB_POLICY_OBJS) $(RUNTIME_OBJS) $(BUILD)/exports.map
	@mkdir -p $(dir $@)
ifneq ($(MUSL),)
	@# The musl build names no libc (no DT_NEEDED): its symbols come from the process's own
	@# libc. Needing musl's libc.so would make glibc's loader, given this library by hand,
	@# refuse to start the program at all; with none it loads, and the constructor sees a
	@# glibc process and stays inactive (shim/init.c). A first link against musl's libc
	@# checks that every symbol resolves there (-z defs), as the glibc build's does.
	$(CC) -shared -fno-lto $(CFLAGS) $(LDFLAGS) -fPIC -Wl,-z,defs \
		-Wl,--version-script=$(BUILD)/exports.map -o $@.check $(LIB_POLICY_OBJS) $(RUNTIME_OBJS) $(LDLIBS_LIB)
	@rm -f $@.check
	$(CC) -shared $(LTO) $(CFLAGS) $(LDFLAGS) -fPIC -nodefaultlibs -Wl,-soname,$(LIB_FILE) \
		-Wl,--version-script=$(BUILD)/exports.map -o $@ $(LIB_POLICY_OBJS) $(RUNTIME_OBJS) \
		$(MUSL_LIBCONFIG) -lgcc
else
	$(CC) -shared $(LTO) $(CFLAGS) $(LDFLAGS) -fPIC $(SAN_LDFLAGS) -Wl,-z,defs -Wl,-soname,$(LIB_FILE) \
		-Wl,--version-script=$(BUILD)/exports.map -o $@ $(LIB_POLICY_OBJS) $(RUNTIME_OBJS) $(LDLIBS_LIB)
endif

$(LAUNCHER): $(CLI_OBJS) $(POLICY_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(SAN_LDFLAGS) -pthread -o $@ $^ $(LAUNCHER_LDLIBS)

# The musl build's libconfig, built once from Debian's source package (kept across make
# clean of the objects: rm -rf build/musl/libconfig to rebuild it).
$(BUILD)/libconfig/lib/libconfig.a:
	@tests/musl_libconfig.sh $(BUILD)/libconfig
$(BUILD)/kinc/linux:
	@mkdir -p $(BUILD)/kinc
	ln -sfn /usr/include/linux $(BUILD)/kinc/linux
	ln -sfn /usr/include/asm-generic $(BUILD)/kinc/asm-generic
	ln -sfn /usr/include/$(shell gcc -print-multiarch)/asm $(BUILD)/kinc/asm

# (A few suites compile a runtime file in, to reach its static parts: shim/ is a dependency.)
$(BUILD)/tests/unit/%: tests/unit/%.c $(POLICY_OBJS) $(wildcard tests/unit/*.h shim/*.c shim/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ipolicy -Wno-missing-prototypes -o $@ $< $(POLICY_OBJS) $(SAN_LDFLAGS) -lcmocka -lconfig

# The runtime core's unit test: sock.o, sock_expire.o and fdtable.o against a fake tb_real
# (the test defines it), with watchdog.c included to reach its static steps.
SOCK_TEST_OBJS := $(BUILD)/obj/shim/sock.o $(BUILD)/obj/shim/sock_expire.o \
                  $(BUILD)/obj/shim/fdtable.o $(BUILD)/obj/shim/service.o
$(BUILD)/tests/unit/test_sock: tests/unit/test_sock.c shim/watchdog.c $(SOCK_TEST_OBJS) \
		$(POLICY_OBJS) $(wildcard tests/unit/*.h shim/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ishim -Ipolicy -Iinclude -Wno-missing-prototypes -o $@ $< \
		$(SOCK_TEST_OBJS) $(POLICY_OBJS) $(SAN_LDFLAGS) -lcmocka -lconfig

# The epoll interest sets: the pure bookkeeping module alone.
$(BUILD)/tests/unit/test_epoll_set: tests/unit/test_epoll_set.c $(BUILD)/obj/shim/epoll_set.o \
		shim/epoll_set.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ishim -Wno-missing-prototypes -o $@ $< \
		$(BUILD)/obj/shim/epoll_set.o $(SAN_LDFLAGS) -lcmocka

# End-to-end helpers (fault server, test clients) are ordinary programs: no sanitizer, so
# that what is tested is the library inside an uninstrumented host. The FORTIFY client is
# built the way distributions build packages.
E2E_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -Wno-missing-prototypes -pthread -Itests/e2e
$(BUILD)/tests/e2e/%: tests/e2e/%.c $(wildcard tests/e2e/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $< -pthread
$(BUILD)/tests/e2e/clients/%: tests/e2e/clients/%.c $(wildcard tests/e2e/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $< -pthread
$(BUILD)/tests/e2e/clients/blockcli_fortify: tests/e2e/clients/blockcli.c
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -O2 -D_FORTIFY_SOURCE=2 -o $@ $< -pthread
# The libevent client links libevent (Debian's libevent-dev, installed by tests/deps.sh).
$(BUILD)/tests/e2e/clients/levcli: tests/e2e/clients/levcli.c
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $< -levent -pthread

# Regression programs: one per real defect, ordinary programs that run themselves under
# the library (tests/regress/regress.h).
$(BUILD)/tests/regress/%: tests/regress/%.c $(wildcard tests/regress/*.h) tests/e2e/tbtest.h shim/real.c shim/real.h
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $< -pthread -ldl

# The stress driver (tests/stress/): an ordinary program like the regression programs; it
# runs its client half under the library (tests/stress/run.sh puts a sanitizer first).
STRESS_C := $(wildcard tests/stress/*.c)
STRESS   := $(BUILD)/tests/stress/stress
$(STRESS): $(STRESS_C) $(wildcard tests/stress/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $(STRESS_C) -pthread

# Benchmark programs: like the end-to-end helpers, optimised and never sanitized.
$(BUILD)/tests/bench/%: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -o $@ $< -pthread
# A library that wraps send, preloaded after timebox by test_core.py.
$(BUILD)/tests/e2e/sendwrap.so: tests/e2e/lib/sendwrap.c
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -shared -fPIC -o $@ $< -ldl
# The native run with one idle thread (the floor of any library that keeps a thread).
$(BUILD)/tests/bench/idle_thread.so: tests/bench/lib/idle_thread.c
	@mkdir -p $(dir $@)
	$(CC) $(E2E_CFLAGS) -shared -fPIC -o $@ $< -pthread

# The framing workload's bytes, on both sides of the exchange.
$(BUILD)/tests/bench/exchange $(BUILD)/tests/bench/echo_server: tests/bench/canned.h

deps-check:
	@tests/deps.sh check

# make test runs the quick bench too (haproxy, valgrind, perf): it installs their packages.
deps-test:
	@tests/deps.sh bench

# Every suite runs, each under a time limit (a hang fails that suite, not the run); the
# summary names the suites that failed.
unit: $(UNIT_BINS) $(LAUNCHER)
	@pass=0; fail=0; failed=; \
	for t in $(UNIT_BINS); do echo "== $$t"; \
		if timeout -k 5 $(UNIT_LIMIT) $$t; then pass=$$((pass + 1)); \
		else fail=$$((fail + 1)); failed="$$failed $$(basename $$t)"; fi; done; \
	echo "== tests/unit/test_launcher.sh"; \
	if timeout -k 5 120 tests/unit/test_launcher.sh $(BUILD); then pass=$$((pass + 1)); \
	else fail=$$((fail + 1)); failed="$$failed test_launcher.sh"; fi; \
	echo; echo "unit suites: $$pass passed, $$fail failed"; \
	if [ $$fail -ne 0 ]; then echo "failed:$$failed"; exit 1; fi

# Internal code never calls an exported name: among the library's objects only the hook
# files may import a name of the export map; every other libc call goes through tb_real.
# The self-test first shows the check catching a planted call to close().
check-exports: $(LIB)
	@tests/check_exports.sh --self-test
	@tests/check_exports.sh $(BUILD)

# Every arrow points down (hooks -> runtime -> policy, launcher -> policy): no cycle among
# the modules' includes or among the objects' symbols, no folder including what its layer
# may not see. The self-test first shows the check catching a planted cycle of each kind.
check-layers: $(LIB) $(LAUNCHER)
	@tests/check_layers.sh --self-test
	@tests/check_layers.sh . $(BUILD)

# The library's static TLS stays within what a dlopen of it gets under ASan's runtime
# (tests/check_tls.sh tells the budget and why).
check-tls: $(LIB)
	@tests/check_tls.sh $(LIB)

regress: all $(REGRESS_BINS)
	@TBR_JOBS=$(REGRESS_JOBS) TB_SANITIZE=$(SANITIZE) tests/regress/run.sh $(BUILD) $(REGRESS_FILTER)

# make stress: 200 threads for 4 minutes; stress-short: 50 threads for 30 s (in make test).
# STRESS_ARGS adds options (--seed N to replay a run, --threads, --secs, --slack MS).
stress: all $(STRESS)
	@TB_SANITIZE=$(SANITIZE) timeout -k 5 600 tests/stress/run.sh $(BUILD) $(STRESS_ARGS)

stress-short: all $(STRESS)
	@TB_SANITIZE=$(SANITIZE) timeout -k 5 120 tests/stress/run.sh $(BUILD) --short $(STRESS_ARGS)

# The conformance tier (tests/conformance/run.py): other projects' own test suites run
# natively and under the library with every limit armed generously, compared test by test,
# each run in a loopback-only network namespace of its own (docs/conformance.md).
# CONFORMANCE_ARGS adds options (--only test_ssl, --jobs, --reruns, --limit SECS per run).
conformance: all
	@tests/deps.sh conformance
	@TB_BUILD=$(BUILD) TB_SANITIZE=$(SANITIZE) timeout -k 10 10800 \
		python3 tests/conformance/run.py $(CONFORMANCE_ARGS)

conformance-short: all
	@tests/deps.sh conformance
	@TB_BUILD=$(BUILD) TB_SANITIZE=$(SANITIZE) timeout -k 10 900 \
		python3 tests/conformance/run.py --subset --jobs 4 $(CONFORMANCE_ARGS)

# The musl column (tests/e2e/test_musl.py): the musl build and the project's own C clients
# built with musl-gcc, run through the launcher of the build under test.
MUSL_CLIENTS := $(addprefix build/musl/tests/e2e/clients/,blockcli evcli stdiocli gaicli gnicli ghbacli)
# Regression programs of defects only the musl build had, built with musl-gcc; test_musl.py
# runs them under it.
MUSL_CLIENTS += $(addprefix build/musl/tests/regress/,stdio_memory_errno inbound_stdio_keepalive \
			musl_msghdr_padding stdio_scanf_no_input)
ifneq ($(MUSL),)
musl-clients: $(MUSL_CLIENTS)
else
musl-clients:
	@$(MAKE) --no-print-directory MUSL=1 SANITIZE= all musl-clients
endif

e2e: all $(E2E_BINS) $(BUILD)/tests/e2e/clients/blockcli_fortify $(BUILD)/tests/e2e/sendwrap.so \
     $(BENCH_BINS) musl-clients
	@TB_BUILD=$(BUILD) TB_SANITIZE=$(SANITIZE) python3 tests/e2e/run.py -j $(E2E_JOBS) $(E2E_ARGS)

test: deps-test
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory check-exports
	@$(MAKE) --no-print-directory check-layers
	@$(MAKE) --no-print-directory check-tls
	@$(MAKE) --no-print-directory regress
	@$(MAKE) --no-print-directory stress-short
	@$(MAKE) --no-print-directory e2e
	@$(MAKE) --no-print-directory conformance-short

demo: deps-check all $(E2E_BINS)
	@TB_BUILD=$(BUILD) python3 tests/demo/demo.py

# The storm and adaptive-gate workloads run the end-to-end tests' server and caller.
BENCH_E2E := $(BUILD)/tests/e2e/stormserver $(BUILD)/tests/e2e/clients/stormcli
bench: all $(BENCH_BINS) $(BENCH_E2E)
	@tests/deps.sh bench
	@TB_BUILD=$(BUILD) python3 tests/bench/run.py $(if $(QUICK),--quick) $(BENCH_ARGS)

# The header's version must be the build's: refuse to install a mismatch.
install: all
	@grep -q '^#define TIMEBOX_VERSION "$(VERSION)"$$' include/timebox.h || \
		{ echo "include/timebox.h does not say version $(VERSION)" >&2; exit 1; }
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PCDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(EXAMPLEDIR)
	install -m 0755 $(LAUNCHER) $(DESTDIR)$(BINDIR)/timebox
	install -m 0644 $(LIB) $(DESTDIR)$(PKGLIBDIR)/$(LIB_FILE)
	install -m 0644 include/timebox.h $(DESTDIR)$(INCLUDEDIR)/timebox.h
	install -m 0644 docs/timebox.1 $(DESTDIR)$(MANDIR)/man1/timebox.1
	install -m 0644 docs/timebox.conf.5 $(DESTDIR)$(MANDIR)/man5/timebox.conf.5
	install -m 0644 docs/timebox.3 $(DESTDIR)$(MANDIR)/man3/timebox_deadline_begin.3
	for f in timebox_deadline_end timebox_remaining_ms; do \
		echo '.so man3/timebox_deadline_begin.3' > $(DESTDIR)$(MANDIR)/man3/$$f.3; done
	install -m 0644 $(EXAMPLES) $(DESTDIR)$(EXAMPLEDIR)/
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' \
		'libdir=$(PKGLIBDIR)' 'preload=$${libdir}/$(LIB_FILE)' '' \
		'Name: timebox' \
		'Description: per-phase timeouts and deadlines for TCP clients, by LD_PRELOAD' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir}' \
		'Libs:' '# The API (timebox_deadline_begin(3)) needs no library: it finds the' \
		'# preloaded one at run time (dlsym; glibc before 2.34: add -ldl).' \
		> $(DESTDIR)$(PCDIR)/timebox.pc

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/timebox $(DESTDIR)$(PKGLIBDIR)/$(LIB_FILE) \
		$(DESTDIR)$(INCLUDEDIR)/timebox.h $(DESTDIR)$(PCDIR)/timebox.pc \
		$(DESTDIR)$(MANDIR)/man1/timebox.1 $(DESTDIR)$(MANDIR)/man5/timebox.conf.5 \
		$(DESTDIR)$(MANDIR)/man3/timebox_deadline_begin.3 \
		$(DESTDIR)$(MANDIR)/man3/timebox_deadline_end.3 \
		$(DESTDIR)$(MANDIR)/man3/timebox_remaining_ms.3 \
		$(addprefix $(DESTDIR)$(EXAMPLEDIR)/,$(notdir $(EXAMPLES)))
	-rmdir $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(EXAMPLEDIR) $(DESTDIR)$(PREFIX)/share/timebox \
		2>/dev/null

# The Debian package, built from debian/ (debhelper 13) in build/debian; the .deb lands in
# build/deb/. Installs its build dependencies first (as root), or names them.
deb:
	@tests/deps.sh deb
	dpkg-buildpackage -us -uc -b
	@mkdir -p $(BUILD)/deb
	mv ../timebox_$(VERSION)_*.deb ../timebox-dbgsym_$(VERSION)_*.deb ../timebox_$(VERSION)_*.buildinfo \
		../timebox_$(VERSION)_*.changes $(BUILD)/deb/
	@ls $(BUILD)/deb/*.deb

clean:
	rm -rf build

# Fuzzing (tests/fuzz, docs/reliability.md): one libFuzzer target per parser of the policy
# layer, built by clang straight from the policy sources with ASan and UBSan.
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS="duration env"]   each target that long
#   make fuzz-smoke                                                each target ~20 s (CI)
# The seeds in tests/fuzz/corpus/<target>/ are read only: new inputs go to
# build/fuzz/fuzz-out/<target>/. A crash, a sanitizer report, a leak, a hang or a broken
# invariant fails the run and keeps its input there (tests/fuzz/run.sh).
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= duration env config match dest frame_pick frame_http frame_tls frame_pg \
                frame_resp propagate
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE $(WARN) -g -O1 \
                -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all -Ipolicy -Itests/fuzz
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-build

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(POLICY_SRCS) $(wildcard policy/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(POLICY_SRCS) -lconfig

# The framing machines: one source, built once per protocol the rule forces ("pick": the
# input's first byte chooses, automatic detection included).
FUZZ_FRAME_pick := pick
FUZZ_FRAME_http := http
FUZZ_FRAME_tls  := tls
FUZZ_FRAME_pg   := postgres
FUZZ_FRAME_resp := redis
$(FUZZ_BUILD)/fuzz_frame_%: tests/fuzz/fuzz_frame.c tests/fuzz/fuzz.h $(POLICY_SRCS) \
		$(wildcard policy/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_FRAME_PROTO='"$(FUZZ_FRAME_$*)"' -o $@ $< \
		$(POLICY_SRCS) -lconfig

fuzz-build:
	@tests/deps.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_BUILD) 20 $(FUZZ_TARGETS)

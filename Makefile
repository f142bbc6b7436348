# hutch build. `make` builds build/hutch; `make test` builds the sanitizer variant and runs the suite.
CC      ?= cc
PKGS    := libseccomp jansson sqlite3 libsodium libuv zlib
CFLAGS_BASE := -std=gnu17 -O2 -g -D_GNU_SOURCE -Isrc \
	-Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wformat=2 -Wstrict-prototypes \
	-Wno-unused-parameter $(shell pkg-config --cflags $(PKGS))
# http-parser ships no .pc file.
LIBS    := $(shell pkg-config --libs $(PKGS)) -lhttp_parser
# The static build needs the libraries' own dependencies too (SQLite's libm, libz, pthread;
# libuv's -lpthread -ldl -lrt); Debian's static libuv is libuv_a.a. SQLite's extension loading
# makes the linker warn about dlopen in a static program: hutch never loads an extension.
STATIC_LIBS := $(patsubst -luv,-l:libuv_a.a,$(shell pkg-config --libs --static $(PKGS))) -lhttp_parser
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# src/sudo/main.c and src/kstub/main.c are programs of their own (build/hutch-sudo,
# build/hutch-kernel-stub), not part of hutch.
SRCS      := $(filter-out src/sudo/main.c src/kstub/main.c,$(sort $(wildcard src/*/*.c)))
LIB_SRCS  := $(filter-out src/cli/main.c,$(SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
PROBE_SRCS := $(sort $(wildcard tests/probe/*.c))

# The seccomp programs are compiled at build time by tools/seccomp_gen.c into a generated file.
GEN_SRC   := build/gen/seccomp_builtin.c
OBJS      := $(SRCS:%.c=build/obj/%.o) build/obj/gen/seccomp_builtin.o
SAN_OBJS  := $(SRCS:%.c=build/san/%.o) build/san/gen/seccomp_builtin.o
SAN_LIB_OBJS := $(LIB_SRCS:%.c=build/san/%.o) build/san/gen/seccomp_builtin.o
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=build/tests/%)
PROBE_BINS := $(PROBE_SRCS:tests/probe/%.c=build/probe/%)
# The engine benchmarks (bench/engine.h): linked against the optimised core, not the sanitizer
# build the tests use, and static like build/hutch, so that their clones copy what a daemon's do.
BENCH_SRCS := $(sort $(wildcard bench/engine*.c bench/bench_*.c))
LIB_OBJS   := $(LIB_SRCS:%.c=build/obj/%.o) build/obj/gen/seccomp_builtin.o

# Fuzz targets (tests/fuzz/): run as unit tests through a deterministic driver (gcc, sanitizers),
# and under libFuzzer by `make fuzz` (clang; not part of `make test`).
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
UNIT_BINS  += $(FUZZ_NAMES:%=build/tests/test_fuzz_%)
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
# clang flags libseccomp's SCMP_A0() for a missing field.
FUZZ_CFLAGS := $(CFLAGS_BASE) -Wno-missing-field-initializers \
	-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=build/fuzz/obj/%.o) build/fuzz/obj/gen/seccomp_builtin.o
.SECONDARY: $(FUZZ_LIB_OBJS)

.PHONY: all san test unit clean bench bench-engine bench-serve bench-interp format fuzz
all: build/hutch build/hutch-sudo build/hutch-kernel-stub build/libhutch-enter.so

# build/hutch is a static PIE: a dynamically linked hutch spends about 2 ms more per
# `hutch run` (about 15%; bench/README.md), in ld.so and in every fork of its keeper and child.
# The sanitizer build stays dynamic (ASan needs it).
# libuv's core.c.o holds uv_os_get_passwd and SQLite's os_unix.o its extension loader, which
# hutch never calls: glibc warns about getpwuid_r (NSS) and dlopen in a static program at every
# link. Those two warnings are dropped; any other is shown.
# $(call link_static,OBJECTS): links $@ so.
link_static = $(CC) $(CFLAGS_BASE) -static-pie -o $@ $(1) $(STATIC_LIBS) 2>$@.ld-log; rc=$$?; \
	grep -v -e "in function \`uv__getpwuid_r':" -e "Using 'getpwuid_r' in statically linked" \
		-e "in function \`unixDlOpen':" -e "Using 'dlopen' in statically linked" $@.ld-log >&2; \
	rm -f $@.ld-log; exit $$rc
build/hutch: $(OBJS) | build/hutch-sudo build/hutch-kernel-stub build/libhutch-enter.so
	@echo "  LD    $@"
	@$(call link_static,$(OBJS))

build/hutch-san: $(SAN_OBJS) | build/hutch-sudo build/hutch-kernel-stub build/libhutch-enter.so
	@echo "  LD    $@"
	@$(CC) $(CFLAGS_BASE) $(SAN) -o $@ $(SAN_OBJS) $(LIBS)

# The sandbox's sudo (src/sudo/): small and static, next to hutch, where the daemon finds it and
# binds it into each sandbox. Only the codec and a few helpers: no library of hutch's.
SUDO_SRCS := src/sudo/main.c src/sudo/options.c src/sudo/tty_relay.c src/proto/proto.c src/proto/proto_sudo.c \
	src/util/err.c src/util/strfmt.c src/util/fds.c
build/hutch-sudo: $(SUDO_SRCS) $(wildcard src/sudo/*.h src/proto/*.h src/util/*.h)
	@mkdir -p $(dir $@)
	@echo "  LD    $@"
	@$(CC) -std=gnu17 -O2 -D_GNU_SOURCE -Isrc -Wall -Wextra -Werror -Wshadow \
		-Wmissing-prototypes -Wformat=2 -Wstrict-prototypes -Wno-unused-parameter -static \
		-o $@ $(SUDO_SRCS)

# A code context's kernel from a warm zygote (src/kstub/): static, no library, bound into each
# sandbox beside the kernels.
build/hutch-kernel-stub: src/kstub/main.c
	@mkdir -p $(dir $@)
	@echo "  LD    $@"
	@$(CC) -std=gnu17 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
		-Wmissing-prototypes -Wformat=2 -Wstrict-prototypes -static -o $@ src/kstub/main.c

# What the host's python zygote loads to enter a sandbox (src/jail/enter.h): a shared library of
# the few steps a command's start takes, from the same sources, hidden but for its two calls.
ENTER_SRCS := src/jail/enter.c src/jail/payload.c src/jail/privs.c src/jail/landlock.c \
	src/jail/seccomp.c src/jail/inroot.c src/jail/control.c src/jail/cgroup_join.c \
	src/util/fileio.c src/util/fds.c src/util/strfmt.c src/util/err.c
ENTER_OBJS := $(ENTER_SRCS:%.c=build/pic/%.o) build/pic/gen/seccomp_builtin.o
build/libhutch-enter.so: $(ENTER_OBJS)
	@echo "  LD    $@"
	@$(CC) -shared -Wl,--no-undefined -Wl,-z,now -Wl,-z,relro -o $@ $(ENTER_OBJS) \
		$(shell pkg-config --libs libseccomp)

build/pic/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC    $< (PIC)"
	@$(CC) $(CFLAGS_BASE) -fPIC -fvisibility=hidden -c -o $@ $<

build/pic/%.o: %.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC    $< (PIC)"
	@$(CC) $(CFLAGS_BASE) -fPIC -fvisibility=hidden -c -o $@ $<

build/seccomp-gen: tools/seccomp_gen.c src/jail/seccomp.c src/util/err.c src/util/strfmt.c src/jail/seccomp.h
	@mkdir -p $(dir $@)
	@echo "  GEN   $@"
	@$(CC) $(CFLAGS_BASE) -o $@ tools/seccomp_gen.c src/jail/seccomp.c src/util/err.c src/util/strfmt.c $(LIBS)

$(GEN_SRC): build/seccomp-gen
	@mkdir -p $(dir $@)
	@build/seccomp-gen > $@.tmp && mv $@.tmp $@

build/obj/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(CFLAGS_BASE) -c -o $@ $<

build/san/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC    $< (sanitizers)"
	@$(CC) $(CFLAGS_BASE) $(SAN) -c -o $@ $<

build/obj/%.o: %.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(CFLAGS_BASE) -c -o $@ $<

build/san/%.o: %.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC    $< (sanitizers)"
	@$(CC) $(CFLAGS_BASE) $(SAN) -c -o $@ $<

build/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  TEST  $@"
	@$(CC) $(CFLAGS_BASE) $(SAN) -Itests/unit -o $@ $< $(SAN_LIB_OBJS) $(LIBS)

build/tests/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/driver.c tests/fuzz/fuzz.h $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  TEST  $@"
	@$(CC) $(CFLAGS_BASE) $(SAN) -DFUZZ_NAME='"$*"' -o $@ $< tests/fuzz/driver.c \
		$(SAN_LIB_OBJS) $(LIBS)

build/fuzz/obj/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC    $< (libFuzzer)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/obj/%.o: %.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC    $< (libFuzzer)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB_OBJS)
	@echo "  FUZZ  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJS) $(LIBS)

# Probes run inside sandboxes: static, so they need nothing from the sandbox's /usr.
build/probe/%: tests/probe/%.c
	@mkdir -p $(dir $@)
	@echo "  PROBE $@"
	@$(CC) -std=gnu17 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -static -o $@ $<

san: build/hutch-san
unit: $(UNIT_BINS)

test: build/hutch build/hutch-san $(UNIT_BINS) $(PROBE_BINS)
	@bash tests/run-all.sh

# Each target for FUZZ_SECONDS; new inputs go to build/fuzz/corpus/NAME, crashes to build/fuzz/NAME-*.
fuzz:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang with libFuzzer"; exit 1; }
	@$(MAKE) --no-print-directory $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
	@failed=; for n in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$n; \
		echo "  FUZZ  $$n for $(FUZZ_SECONDS) s (log build/fuzz/$$n.log)"; \
		build/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=build/fuzz/$$n- \
			build/fuzz/corpus/$$n tests/fuzz/corpus/$$n >build/fuzz/$$n.log 2>&1 \
			|| { failed="$$failed $$n"; grep -E '^(==|SUMMARY|fuzz:|artifact_prefix|Test unit)' build/fuzz/$$n.log; }; \
		grep -E '^Done [0-9]+ runs' build/fuzz/$$n.log | sed 's/^/        /'; \
	done; [ -z "$$failed" ] || { echo "fuzz: failed:$$failed"; exit 1; }

build/bench/engine: $(BENCH_SRCS) bench/engine.h $(LIB_OBJS) $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  LD    $@"
	@$(call link_static,$(BENCH_SRCS) $(LIB_OBJS) -lm)

# `make bench`: the start-up benchmark, then the engine's (bench/engine.sh); `make bench-engine`:
# the engine's alone.
bench: build/hutch build/bench/engine
	@bash bench/run.sh

bench-engine: build/hutch build/bench/engine
	@bash bench/engine.sh

# `make bench-serve`: the daemon over E2B's API (bench/serve.py), against hutch run and bare exec.
bench-serve: build/hutch
	@python3 bench/serve.py

# `make bench-interp`: the code interpreter over its port (bench/interp.py), with and without the
# kernels' zygote.
bench-interp: build/hutch
	@python3 bench/interp.py

format:
	clang-format -i $(SRCS) $(wildcard src/*/*.h) $(UNIT_SRCS) $(PROBE_SRCS)

clean:
	rm -rf build

# hutch build. `make` builds build/hutch; `make test` builds the sanitizer variant and runs the suite.
CC      ?= cc
PKGS    := libseccomp jansson
CFLAGS_BASE := -std=gnu17 -O2 -g -D_GNU_SOURCE -Isrc \
	-Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wformat=2 -Wstrict-prototypes \
	-Wno-unused-parameter -Wno-format-truncation $(shell pkg-config --cflags $(PKGS))
LIBS    := $(shell pkg-config --libs $(PKGS))
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

SRCS      := $(sort $(wildcard src/*/*.c))
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

.PHONY: all san test unit clean bench format
all: build/hutch

build/hutch: $(OBJS)
	@echo "  LD    $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LIBS)

build/hutch-san: $(SAN_OBJS)
	@echo "  LD    $@"
	@$(CC) $(CFLAGS_BASE) $(SAN) -o $@ $^ $(LIBS)

build/seccomp-gen: tools/seccomp_gen.c src/jail/seccomp.c src/util/err.c src/jail/seccomp.h
	@mkdir -p $(dir $@)
	@echo "  GEN   $@"
	@$(CC) $(CFLAGS_BASE) -o $@ tools/seccomp_gen.c src/jail/seccomp.c src/util/err.c $(LIBS)

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

build/tests/%: tests/unit/%.c tests/unit/tap.h $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	@echo "  TEST  $@"
	@$(CC) $(CFLAGS_BASE) $(SAN) -Itests/unit -o $@ $< $(SAN_LIB_OBJS) $(LIBS)

# Probes run inside sandboxes: static, so they need nothing from the sandbox's /usr.
build/probe/%: tests/probe/%.c
	@mkdir -p $(dir $@)
	@echo "  PROBE $@"
	@$(CC) -std=gnu17 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -static -o $@ $<

san: build/hutch-san
unit: $(UNIT_BINS)

test: build/hutch build/hutch-san $(UNIT_BINS) $(PROBE_BINS)
	@bash tests/run-all.sh

bench: build/hutch
	@bash bench/run.sh

format:
	clang-format -i $(SRCS) $(wildcard src/*/*.h) $(UNIT_SRCS) $(PROBE_SRCS)

clean:
	rm -rf build

# --- store: redis --- Redis (hiredis)
if WITH_REDIS
pkglib_LTLIBRARIES += redis.la
redis_la_SOURCES = %reldir%/redis.c %reldir%/redis-conn.c \
	%reldir%/redis-watch.c %reldir%/redis-runs.c %reldir%/redis-url.c \
	%reldir%/redis-cluster.c %reldir%/redis-list.c %reldir%/redis-int.h
redis_la_CFLAGS = $(AM_CFLAGS) $(REDIS_CFLAGS)
redis_la_LIBADD = libstore.la $(REDIS_LIBS)
redis_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/redis.bats tests/redis-sentinel.bats \
	tests/redis-cluster.bats tests/redis-cluster-auth.bats
# The same files against valkey-server.
OTHER_TESTS += tests/valkey.test
# TLS for rediss://, in a module of its own so that redis:// maps no TLS
# library (see src/net/tls.h).
if WITH_TLS
pkglib_LTLIBRARIES += redis-tls.la
redis_tls_la_SOURCES = $(TLS_SOURCES)
redis_tls_la_CFLAGS = $(AM_CFLAGS) $(OPENSSL_CFLAGS)
redis_tls_la_LIBADD = libstore.la $(OPENSSL_LIBS)
redis_tls_la_LDFLAGS = $(TLS_LDFLAGS)
BATS_FILES += tests/redis-tls.bats
endif
endif
EXTRA_DIST += tests/redis.bats tests/redis-tls.bats tests/redis-sentinel.bats \
	tests/redis-server.bash tests/redis-faults.bash tests/redis-sentinel.bash \
	tests/redis-cluster.bats tests/redis-cluster-auth.bats \
	tests/redis-cluster-server.bash tests/valkey.test
dist_man_MANS += man/leaserun-redis.7
# The store's Lua scripts, one a file, and the fragments they share
# (lib/); %reldir%/gen-scripts splices them and writes each one's text
# and SHA-1 into %reldir%/scripts.h, in the build tree.
REDIS_LUA = %reldir%/acquire.lua %reldir%/acquire-slotted.lua \
	%reldir%/break.lua %reldir%/inspect.lua %reldir%/list.lua \
	%reldir%/release.lua \
	%reldir%/release-slotted.lua %reldir%/renew.lua \
	%reldir%/renew-slotted.lua %reldir%/run-end.lua \
	%reldir%/run-start.lua %reldir%/lib/fence.lua \
	%reldir%/lib/now.lua %reldir%/lib/wake.lua %reldir%/lib/holders.lua
if WITH_REDIS
nodist_redis_la_SOURCES = %reldir%/scripts.h
redis_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/src
BUILT_SOURCES += %reldir%/scripts.h
endif
CLEANFILES += %reldir%/scripts.h
EXTRA_DIST += $(REDIS_LUA) %reldir%/gen-scripts
%reldir%/scripts.h: $(REDIS_LUA) %reldir%/gen-scripts
	$(AM_V_GEN)$(MKDIR_P) %reldir% && \
	AWK='$(AWK)' $(SHELL) $(srcdir)/%reldir%/gen-scripts >$@.tmp && \
	mv -f $@.tmp $@
# --- end redis

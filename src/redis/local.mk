# --- store: redis --- Redis (hiredis)
if WITH_REDIS
pkglib_LTLIBRARIES += redis.la
redis_la_SOURCES = %reldir%/redis.c
redis_la_CFLAGS = $(AM_CFLAGS) $(REDIS_CFLAGS)
redis_la_LIBADD = libstore.la $(REDIS_LIBS)
redis_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/redis.bats tests/redis-sentinel.bats
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
	tests/redis-server.bash tests/redis-faults.bash tests/redis-sentinel.bash
# --- end redis

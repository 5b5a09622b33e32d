# --- store: pg --- PostgreSQL (libpq)
if WITH_PG
pkglib_LTLIBRARIES += pg.la
pg_la_SOURCES = %reldir%/pg.c
pg_la_CFLAGS = $(AM_CFLAGS) $(PG_CFLAGS)
pg_la_LIBADD = libstore.la $(PG_LIBS)
pg_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/pg.bats
endif
EXTRA_DIST += tests/pg.bats tests/pg-server.bash
dist_man_MANS += man/leaserun-postgresql.7
# --- end pg

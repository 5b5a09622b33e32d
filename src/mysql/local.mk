# --- store: mysql --- MySQL and MariaDB (their protocol spoken by wire.c)
if WITH_MYSQL
pkglib_LTLIBRARIES += mysql.la
mysql_la_SOURCES = %reldir%/mysql.c %reldir%/wire.c %reldir%/wire.h \
	%reldir%/sha.c %reldir%/sha.h
mysql_la_LIBADD = libstore.la
mysql_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/mysql.bats
# TLS for ssl-mode=..., in a module of its own so that a connection
# without TLS maps no TLS library (see src/net/tls.h).
if WITH_TLS
pkglib_LTLIBRARIES += mysql-tls.la
mysql_tls_la_SOURCES = $(TLS_SOURCES)
mysql_tls_la_CFLAGS = $(AM_CFLAGS) $(OPENSSL_CFLAGS)
mysql_tls_la_LIBADD = libstore.la $(OPENSSL_LIBS)
mysql_tls_la_LDFLAGS = $(TLS_LDFLAGS)
BATS_FILES += tests/mysql-tls.bats
endif
endif
EXTRA_DIST += tests/mysql.bats tests/mysql-tls.bats tests/mysql-server.bash
dist_man_MANS += man/leaserun-mysql.7
# --- end mysql

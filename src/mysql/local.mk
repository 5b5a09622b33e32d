# --- store: mysql --- MySQL and MariaDB (MariaDB Connector/C)
if WITH_MYSQL
pkglib_LTLIBRARIES += mysql.la
mysql_la_SOURCES = %reldir%/mysql.c
mysql_la_CFLAGS = $(AM_CFLAGS) $(MYSQL_CFLAGS)
mysql_la_LIBADD = libstore.la $(MYSQL_LIBS)
mysql_la_LDFLAGS = $(MODULE_LDFLAGS)
BATS_FILES += tests/mysql.bats tests/mysql-tls.bats
endif
EXTRA_DIST += tests/mysql.bats tests/mysql-tls.bats tests/mysql-server.bash
dist_man_MANS += man/leaserun-mysql.7
# --- end mysql

/*
 * wire.h - the part of MySQL's client/server protocol that the MySQL
 * store speaks, itself: a login (mysql_native_password,
 * caching_sha2_password, mysql_clear_password; TLS by the URL's
 * ssl-mode) and text statements with their OK, error or rows, over one
 * non-blocking connection (net.h's stream), every wait bounded by the
 * caller's deadline.  MariaDB and MySQL speak it alike.
 *
 * A statement that runs out of time stays in flight: my_wire_drive()
 * goes on with it later, from where it stopped, packet by packet.
 *
 * What a server can make us keep is bounded: one packet by MY_MAX_PACKET,
 * one statement's rows by MY_MAX_ANSWER.  Past either, or at a packet
 * that does not parse, the connection is shut down and marked broken.
 */
#ifndef LEASERUN_MYSQL_WIRE_H
#define LEASERUN_MYSQL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"

/* The client's errors (as MySQL's errmsg.h numbers them) and the
 * server's that the store tells apart (mysqld_error.h). */
#define CR_CONNECTION_ERROR 2002 /* a Unix socket: no connect */
#define CR_CONN_HOST_ERROR 2003	 /* TCP: no connect */
#define CR_UNKNOWN_HOST 2005	 /* a name that does not resolve */
#define CR_SERVER_GONE_ERROR 2006
#define CR_OUT_OF_MEMORY 2008
#define CR_SERVER_LOST 2013	 /* the connection broke */
#define CR_NET_PACKET_TOO_LARGE 2020 /* past MY_MAX_PACKET/MY_MAX_ANSWER */
#define CR_SSL_CONNECTION_ERROR 2026
#define CR_MALFORMED_PACKET 2027
#define CR_AUTH_PLUGIN_CANNOT_LOAD 2059 /* a login we do not speak */
#define ER_CON_COUNT_ERROR 1040
#define ER_ACCESS_DENIED_ERROR 1045
#define ER_SERVER_SHUTDOWN 1053
#define ER_NO_SUCH_THREAD 1094
#define ER_KILL_DENIED_ERROR 1095
#define ER_TABLEACCESS_DENIED_ERROR 1142
#define ER_COLUMNACCESS_DENIED_ERROR 1143
#define ER_NO_SUCH_TABLE 1146
#define ER_UNKNOWN_SYSTEM_VARIABLE 1193
#define ER_TOO_MANY_USER_CONNECTIONS 1203
#define ER_OPTION_PREVENTS_STATEMENT 1290
#define ER_QUERY_INTERRUPTED 1317
#define ER_CONNECTION_KILLED 1927 /* MariaDB: KILL CONNECTION */

/* Ours are a few short rows, and a page of --list some 100 kB. */
#define MY_MAX_PACKET ((size_t)1 << 20)
#define MY_MAX_ANSWER ((size_t)8 << 20)

/* A statement's rows: each row one allocation, its column pointers then
 * their text (NULL for SQL NULL), each text ending in '\0'.  Statements
 * sent together (separated by ';') answer with a result each: those
 * with rows are chained by more, in order. */
typedef char **my_row;
struct my_rows {
	unsigned nf;  /* columns */
	size_t n;     /* rows */
	size_t next;  /* the next for my_rows_next() */
	size_t cap;
	size_t bytes; /* what they take, about, with those before */
	my_row *row;
	struct my_rows *more; /* the next statement's */
};

/* Frees rs and those chained after it. */
void my_rows_free(struct my_rows *rs);
/* The next row of rs, or NULL. */
my_row my_rows_next(struct my_rows *rs);

/* Where to log in, and as whom. */
enum my_tls { MY_TLS_NO, MY_TLS_IF_OFFERED, MY_TLS_MUST };
struct my_login {
	const char *host;     /* NULL: the Unix socket path */
	int port;
	const char *path;
	const char *user;     /* NULL: "" */
	const char *password; /* NULL: none */
	const char *db;       /* NULL: none */
	enum my_tls tls;      /* over TCP; a Unix socket is never TLS */
	struct lr_tls_conf tls_conf;
};

enum my_wire_state { MW_IDLE, MW_SEND, MW_HEAD, MW_COLS, MW_ROWS };

struct my_conn {
	struct lr_stream s;  /* s.fd -1: no connection */
	unsigned char *in;   /* bytes read: in[off, len) not yet taken */
	size_t off, len, cap;
	size_t take;         /* the packet handed out, taken at the next */
	unsigned char *out;  /* bytes to write: out[out_off, out_len) */
	size_t out_off, out_len, out_cap;
	enum my_wire_state state;
	unsigned char seq;   /* the next packet's sequence number */
	unsigned long cols;  /* column definitions still to come */
	unsigned more;       /* answers still allowed after this one */
	unsigned done;       /* statements sent together answered in full */
	struct my_rows *res; /* the rows so far */
	struct my_rows *last; /* the last of them */
	uint64_t insert_id;  /* of the last OK */
	unsigned long id;    /* the connection's id, from the greeting */
	int tls;             /* TLS is on */
	int mariadb;         /* the greeting says MariaDB */
	int multi;           /* takes statements together (a; b) */
	int local;           /* over a Unix socket */
	int ready;           /* logged in */
	int broken;          /* of no more use: a new connection is needed */
	int heals;           /* the failure was of the transport */
	unsigned err;        /* the last failure: CR_* or the server's */
	char msg[512];
};

/* Connects and logs in, by deadline.  LR_OK; LR_TIMEOUT; LR_ERROR with
 * c->err, c->msg and c->heals.  c is zeroed first; my_wire_close() it
 * in every case. */
enum lr_status my_wire_connect(struct my_conn *c, const struct my_login *l,
			       int64_t deadline);
/* Queues sql, n_stmts statements separated by ';' (more than one only
 * where c->multi), for my_wire_drive(), only when no statement is in
 * flight (c->state == MW_IDLE).  0, or -1 with c->err and c->msg (no
 * connection, out of memory). */
int my_wire_send(struct my_conn *c, const char *sql, unsigned n_stmts);
/* Drives the statement in flight, by deadline.  LR_OK: done, its rows
 * (if it has any) in c->res, its last OK in c->insert_id; LR_TIMEOUT: still
 * in flight; LR_ERROR: c->err and c->msg, c->broken if the connection
 * went with it.  Statements sent together stop at the first that fails:
 * when the server said so (an error packet) and the connection stays,
 * c->done of them were answered in full before it, and c->res keeps
 * their rows. */
enum lr_status my_wire_drive(struct my_conn *c, int64_t deadline);
/* While no statement is in flight, the server sends nothing unasked but
 * the end of our session.  0: nothing came; else 1 with why in c->msg
 * (c->broken set). */
int my_wire_idle(struct my_conn *c);
/* Shuts the connection down at once, as a server that sends too much
 * is cut off: its session ends, and with it its locks. */
void my_wire_cut(struct my_conn *c);
/* Says goodbye (COM_QUIT) if it can at once, closes, and frees. */
void my_wire_close(struct my_conn *c);

#endif

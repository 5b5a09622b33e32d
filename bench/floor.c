/*
 * bench/floor.c - the least a Redis lease can cost on this machine, as a
 * reference for bench/redis.sh: a C client (hiredis, linked at build
 * time) that connects, takes the lease with one EVAL (SET NX PX, and the
 * next fence by INCR), runs the command, and gives the lease back with
 * one EVAL (compare-and-delete).  One connection, two round trips; no
 * guards, no watch, no renewal, no state file.  Not a tool.
 *
 *   floor PORT COMMAND [ARG...]
 *
 * Exits with the command's status, 1 if the lease is taken, 2 on trouble.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

static const char grant[] =
	"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
	"return {1, redis.call('INCR', KEYS[2])} end "
	"return {0, redis.call('PTTL', KEYS[1])}";
static const char give_back[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('DEL', KEYS[1]) end return 0";

int main(int argc, char **argv)
{
	unsigned char rnd[16];
	char tok[33];
	redisContext *c;
	redisReply *r;
	pid_t pid;
	int i, status;

	if (argc < 3) {
		fprintf(stderr, "usage: floor PORT COMMAND [ARG...]\n");
		return 2;
	}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return 2;
	for (i = 0; i < 16; i++)
		snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
	c = redisConnect("127.0.0.1", atoi(argv[1]));
	if (!c || c->err)
		return 2;
	r = redisCommand(c, "EVAL %s 2 %s %s %s %s", grant, "floor:lease",
			 "floor:fence", tok, "10000");
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
		return 2;
	if (r->element[0]->integer != 1)
		return 1;
	freeReplyObject(r);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	r = redisCommand(c, "EVAL %s 1 %s %s", give_back, "floor:lease", tok);
	if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
		return 2;
	freeReplyObject(r);
	redisFree(c);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

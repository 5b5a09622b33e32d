/*
 * freeport - print a TCP port on 127.0.0.1 that is free right now.
 * Tests use it to start real servers on loopback.  With an argument N,
 * prints N distinct ports.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, i, fds[64];

	if (n < 1 || n > 64)
		return 2;
	for (i = 0; i < n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		socklen_t len = sizeof(sa);

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || bind(fds[i], (void *)&sa, sizeof(sa)) < 0 ||
		    getsockname(fds[i], (void *)&sa, &len) < 0) {
			perror("freeport");
			return 1;
		}
		printf("%u\n", ntohs(sa.sin_port));
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
	return 0;
}

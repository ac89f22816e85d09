// respawn: the floor of restart latency. It runs argv[1..] and, whenever
// it exits, runs it again: fork, execv, waitpid and nothing else (no
// journal, no backoff, no logging). It gives up only when exec fails.
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	for (;;) {
		pid_t pid = fork();
		if (pid == 0) {
			execv(argv[1], argv + 1);
			_exit(127);
		}
		if (pid < 0) {
			sleep(1);
			continue;
		}
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
			return 127;
	}
}

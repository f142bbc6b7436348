/* The control channel: well-formed messages and fds pass; malformed ones are refused. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jail/control.h"
#include "tap.h"

int main(void)
{
    int sv[2];
    ok(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");

    struct control_msg msg;
    int fd = -2;
    ok(control_send_simple(sv[0], CONTROL_EXIT, 3, 0, "done") == 0, "send EXIT");
    ok(control_recv(sv[1], &msg, &fd) == 1, "receive EXIT");
    ok(msg.type == CONTROL_EXIT && msg.code == 3 && strcmp(msg.text, "done") == 0 && fd == -1,
       "EXIT carries code and text, no fd");

    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct control_msg ready = {.type = CONTROL_READY, .code = 7};
    ok(control_send(sv[0], &ready, devnull) == 0, "send READY with an fd");
    ok(control_recv(sv[1], &msg, &fd) == 1 && msg.type == CONTROL_READY && fd >= 0,
       "READY arrives with an fd");
    ok(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "the received fd is close-on-exec");
    if (fd >= 0)
        close(fd);
    close(devnull);

    /* hostile peers */
    char small[10] = "short";
    ok(send(sv[0], small, sizeof small, 0) == sizeof small, "send a short message");
    ok(control_recv(sv[1], &msg, &fd) == -1 && errno == EBADMSG, "short message is EBADMSG");

    struct control_msg bad;
    memset(&bad, 'A', sizeof bad);
    bad.type = 999;
    ok(send(sv[0], &bad, sizeof bad, 0) == sizeof bad, "send unknown type");
    ok(control_recv(sv[1], &msg, &fd) == -1 && errno == EBADMSG, "unknown type is EBADMSG");

    bad.type = 0;
    send(sv[0], &bad, sizeof bad, 0);
    ok(control_recv(sv[1], &msg, &fd) == -1 && errno == EBADMSG, "type 0 is EBADMSG");

    char big[sizeof(struct control_msg) + 100];
    memset(big, 'B', sizeof big);
    struct control_msg *bm = (struct control_msg *)big;
    bm->type = CONTROL_EXIT;
    send(sv[0], big, sizeof big, 0);
    ok(control_recv(sv[1], &msg, &fd) == -1 && errno == EBADMSG, "oversized message is EBADMSG");

    memset(&bad, 'C', sizeof bad);
    bad.type = CONTROL_SETUP_ERROR;
    send(sv[0], &bad, sizeof bad, 0);
    ok(control_recv(sv[1], &msg, &fd) == 1 && msg.text[sizeof msg.text - 1] == '\0' &&
           strlen(msg.text) == sizeof msg.text - 1,
       "unterminated text is cut to a terminated string");

    close(sv[0]);
    ok(control_recv(sv[1], &msg, &fd) == 0, "EOF is 0");
    close(sv[1]);
    return done_testing();
}

/* src/api/envd_process: the process service's requests as the SDK sends them (captured bodies,
 * ../shared/e2b/PROTOCOL.md) and hostile ones, and the events byte for byte as envd sends them. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "api/envd_process.h"
#include "tap.h"

int main(void)
{
    err_t err = {0};
    struct envd_start s;
    int rc = envd_start_parse(
        "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],\"envs\":{\"A\":"
        "\"1\"},\"cwd\":\"/tmp\"},\"stdin\":false,\"tag\":\"t1\"}",
        &s, &err);
    ok(rc == 0, "the SDK's Start parses (%s)", rc ? err.msg : "ok");
    ok(rc == 0 && strcmp(s.argv[0], "/bin/bash") == 0 && strcmp(s.argv[3], "echo hi") == 0 &&
           !s.argv[4] && strcmp(s.envp[0], "A=1") == 0 && !s.envp[1] &&
           strcmp(s.cwd, "/tmp") == 0 && strcmp(s.tag, "t1") == 0 && !s.stdin_open && !s.pty,
       "argv, env, cwd, tag, stdin closed");
    envd_start_free(&s);
    rc = envd_start_parse("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"]},\"pty\":{"
                          "\"size\":{\"cols\":80,\"rows\":24}}}",
                          &s, &err);
    ok(rc == 0 && s.pty && s.rows == 24 && s.cols == 80 && s.stdin_open && !s.cwd,
       "a pty with its size; stdin omitted is open");
    envd_start_free(&s);
    static const struct {
        const char *body, *says;
        int errnum;
    } bad[] = {
        {"{}", "process must be", EINVAL},
        {"{\"process\":{\"cmd\":\"\"}}", "is empty", EINVAL},
        {"{\"process\":{\"cmd\":1}}", "process.cmd must be a string", EINVAL},
        {"{\"process\":{\"cmd\":\"a\",\"args\":\"x\"}}", "process.args must be", EINVAL},
        {"{\"process\":{\"cmd\":\"a\",\"args\":[1]}}", "process.args[] must be", EINVAL},
        {"{\"process\":{\"cmd\":\"a\",\"envs\":{\"A=B\":\"1\"}}}", "not a variable name", EINVAL},
        {"{\"process\":{\"cmd\":\"a\"},\"pty\":{\"size\":{\"cols\":0,\"rows\":24}}}", "1 to 65535",
         EINVAL},
        {"{\"process\":{\"cmd\":\"a\"},\"pty\":{}}", "pty", EINVAL},
        {"{\"process\":{\"cmd\":\"a\"},\"stdin\":\"no\"}", "stdin must be", EINVAL},
        {"[1]", "must be a JSON object", EINVAL},
        {"{\"process\":", "not JSON", EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        rc = envd_start_parse(bad[i].body, &s, &err);
        ok(rc < 0 && err.errnum == bad[i].errnum && strstr(err.msg, bad[i].says) && !s.argv,
           "%s: refused (%s)", bad[i].body, err.msg);
    }

    struct envd_selector sel;
    ok(envd_selector_parse("{\"process\":{\"pid\":1234}}", &sel, &err) == 0 && !sel.by_tag &&
           sel.pid == 1234,
       "a selector by pid");
    ok(envd_selector_parse("{\"process\":{\"pid\":\"77\"}}", &sel, &err) == 0 && sel.pid == 77,
       "a pid as a string, as protobuf-JSON allows");
    ok(envd_selector_parse("{\"process\":{\"tag\":\"t1\"}}", &sel, &err) == 0 && sel.by_tag &&
           strcmp(sel.tag, "t1") == 0,
       "a selector by tag");
    ok(envd_selector_parse("{\"process\":{\"pid\":-1}}", &sel, &err) < 0 &&
           envd_selector_parse("{\"process\":{}}", &sel, &err) < 0 &&
           envd_selector_parse("{\"process\":{\"pid\":4294967296}}", &sel, &err) < 0,
       "a negative, missing or too large pid: refused");
    bool to_pty;
    uint8_t *data;
    size_t len;
    ok(envd_input_parse("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGVsbG8K\"}}", &sel,
                        &to_pty, &data, &len, &err) == 0 &&
           !to_pty && len == 6 && memcmp(data, "hello\n", 6) == 0,
       "SendInput to stdin, base64 decoded");
    free(data);
    ok(envd_input_parse("{\"process\":{\"pid\":1},\"input\":{\"pty\":\"aGk\"}}", &sel, &to_pty,
                        &data, &len, &err) == 0 &&
           to_pty && len == 2 && memcmp(data, "hi", 2) == 0,
       "to a pty, without padding");
    free(data);
    ok(envd_input_parse("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"!!!\"}}", &sel, &to_pty,
                        &data, &len, &err) < 0 &&
           !data && strstr(err.msg, "base64"),
       "input that is not base64: refused");
    enum envd_stream_input kind;
    ok(envd_stream_input_parse("{\"start\":{\"process\":{\"tag\":\"t1\"}}}", &kind, &sel, &to_pty,
                               &data, &len, &err) == 0 &&
           kind == ENVD_STREAM_INPUT_START && sel.by_tag && strcmp(sel.tag, "t1") == 0 && !data,
       "StreamInput: a start event selects by tag");
    ok(envd_stream_input_parse("{\"data\":{\"input\":{\"pty\":\"aGk=\"}}}", &kind, &sel, &to_pty,
                               &data, &len, &err) == 0 &&
           kind == ENVD_STREAM_INPUT_DATA && to_pty && len == 2 && memcmp(data, "hi", 2) == 0,
       "StreamInput: a data event to the pty, decoded");
    free(data);
    ok(envd_stream_input_parse("{\"keepalive\":{}}", &kind, &sel, &to_pty, &data, &len, &err) ==
               0 &&
           kind == ENVD_STREAM_INPUT_KEEPALIVE && !data,
       "StreamInput: a keepalive");
    ok(envd_stream_input_parse("{\"keepalive\":{},\"data\":{\"input\":{\"stdin\":\"\"}}}", &kind,
                               &sel, &to_pty, &data, &len, &err) < 0 &&
           !data && err.errnum == EINVAL,
       "StreamInput: two events in one message are refused");
    ok(envd_stream_input_parse("{\"start\":5}", &kind, &sel, &to_pty, &data, &len, &err) < 0 &&
           !data,
       "StreamInput: a start that is not an object is refused");
    int signo;
    ok(envd_signal_parse("{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGKILL\"}", &sel, &signo,
                         &err) == 0 &&
           signo == SIGKILL,
       "SendSignal SIGNAL_SIGKILL");
    ok(envd_signal_parse("{\"process\":{\"pid\":1},\"signal\":15}", &sel, &signo, &err) == 0 &&
           signo == SIGTERM,
       "a signal as its number");
    ok(envd_signal_parse("{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGSTOP\"}", &sel, &signo,
                         &err) < 0 &&
           envd_signal_parse("{\"process\":{\"pid\":1},\"signal\":19}", &sel, &signo, &err) < 0,
       "other signals: refused, as envd has only SIGKILL and SIGTERM");
    unsigned short rows, cols;
    ok(envd_update_parse("{\"process\":{\"pid\":1},\"pty\":{\"size\":{\"cols\":120,\"rows\":40}}}",
                         &sel, &rows, &cols, &err) == 0 &&
           rows == 40 && cols == 120,
       "Update with a pty size");

    char *e = envd_event_start(1234);
    is_str(e, "{\"event\":{\"start\":{\"pid\":1234}}}", "start, as captured");
    free(e);
    e = envd_event_data("stdout", (const uint8_t *)"hi\n", 3);
    is_str(e, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}", "data, base64, as captured");
    free(e);
    e = envd_event_keepalive();
    is_str(e, "{\"event\":{\"keepalive\":{}}}", "keepalive");
    free(e);
    e = envd_event_end(0, 0);
    is_str(e, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}",
           "end, exit 0, as captured");
    free(e);
    e = envd_event_end(3, 0);
    is_str(e,
           "{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\","
           "\"error\":\"exit status 3\"}}}",
           "end, exit 3, as captured");
    free(e);
    e = envd_event_end(0, SIGKILL);
    is_str(e,
           "{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\",\"error\":"
           "\"signal: killed\"}}}",
           "end, SIGKILL, as captured");
    free(e);
    const char *const argv[] = {"/bin/bash", "-l", "-c", "sleep 9", NULL};
    const char *const envp[] = {"A=1", NULL};
    struct envd_process_entry entry = {.pid = 7, .tag = "bg", .argv = argv, .envp = envp};
    e = envd_list_reply(&entry, 1);
    is_str(e,
           "{\"processes\":[{\"config\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"sleep "
           "9\"],\"envs\":{\"A\":\"1\"}},\"pid\":7,\"tag\":\"bg\"}]}",
           "List's reply, config first");
    free(e);
    return done_testing();
}
